"""Where an embedded server keeps its files and how it is reached, from its var directory
alone: the settings, the server and its command compute the same answers."""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[3]
DATABASE = "budgets"
SUPERUSER = "postgres"
# Set, the server also listens on 127.0.0.1 at this port (for a desktop SQL client, say);
# unset, it has a Unix socket only. Its socket is named after the port either way, so
# every process of one checkout must see the same value.
TCP_PORT_VARIABLE = "EMBEDDED_POSTGRES_TCP_PORT"
TCP_PORT = int(os.environ.get(TCP_PORT_VARIABLE, "") or 0) or None
PORT = TCP_PORT or 5432
SERVER_USER = "budgets-postgres"
# A socket's path must fit in sun_path: 108 bytes on Linux, 104 on macOS, NUL included.
SOCKET_PATH_MAX = 103


class EmbeddedPostgresError(Exception):
    """The embedded server could not be set up, started or stopped; the message says why."""


@dataclass(frozen=True)
class Server:
    """Where one embedded server keeps its files, all derived from the var directory."""

    var_dir: Path

    @property
    def home(self) -> Path:
        return self.var_dir / "postgres"

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def log(self) -> Path:
        return self.home / "server.log"

    @property
    def socket_dir(self) -> Path:
        near = self.home / "run"
        if len(os.fsencode(near / f".s.PGSQL.{PORT}")) <= SOCKET_PATH_MAX:
            return near
        # A checkout deep in the file system: a short directory of its own, the same for
        # every process that computes it, hence a fixed parent rather than $TMPDIR.
        digest = hashlib.sha256(os.fsencode(self.home)).hexdigest()[:12]
        return Path("/tmp") / f"latency-budgets-{digest}"  # noqa: S108

    def connect_kwargs(self, *, database: str = DATABASE) -> dict[str, Any]:
        return {"host": str(self.socket_dir), "port": PORT, "user": SUPERUSER, "dbname": database}

    def url(self, *, database: str = DATABASE) -> str:
        """A ``DATABASE_URL`` for this server, readable by django-environ and libpq alike."""
        return f"postgres://{SUPERUSER}@/{database}?" + urlencode(
            {"host": str(self.socket_dir), "port": PORT}
        )


def server_at(*, var_dir: Path) -> Server:
    return Server(var_dir=var_dir.resolve())


def default_var_dir() -> Path:
    """The settings' ``VAR_DIR``: the variable when set, ``var/`` in the checkout otherwise."""
    return Path(os.environ.get("VAR_DIR", str(ROOT / "var")))
