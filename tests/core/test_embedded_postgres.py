"""The embedded PostgreSQL server: under var/, on a Unix socket only, started once, stopped
on demand."""

import os
import pwd
import shutil
from pathlib import Path

import environ
import psycopg
import pytest

from apps.core import embedded_postgres
from apps.core.embedded_postgres import EmbeddedPostgresError, Server


def _postmaster_pid(server: Server) -> int:
    return int((server.data / "postmaster.pid").read_text().split()[0])


def test_the_socket_sits_under_var_when_the_path_is_short() -> None:
    server = Server(var_dir=Path("/srv/budgets/var"))
    assert server.socket_dir == Path("/srv/budgets/var/postgres/run")
    assert server.data == Path("/srv/budgets/var/postgres/data")


def test_a_deep_checkout_gets_a_short_socket_directory_of_its_own() -> None:
    deep = Server(var_dir=Path("/home") / ("d" * 100) / "var")
    other = Server(var_dir=Path("/home") / ("e" * 100) / "var")
    socket = deep.socket_dir / f".s.PGSQL.{embedded_postgres.PORT}"
    assert len(os.fsencode(socket)) <= embedded_postgres.SOCKET_PATH_MAX
    assert deep.socket_dir == Server(var_dir=deep.var_dir).socket_dir
    assert deep.socket_dir != other.socket_dir


def test_the_url_names_the_socket_for_django_environ() -> None:
    server = Server(var_dir=Path("/srv/my budgets/var"))
    config = environ.Env.db_url_config(server.url(database="test_budgets"))
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "test_budgets"
    assert config["OPTIONS"] == {"host": "/srv/my budgets/var/postgres/run", "port": 5432}


@pytest.mark.slow
def test_start_runs_a_server_reached_only_through_its_socket(server_var_dir: Path) -> None:
    server = embedded_postgres.start(var_dir=server_var_dir)
    with psycopg.connect(server.url()) as db:
        assert db.execute("SHOW listen_addresses").fetchone() == ("",)
        assert db.execute("SELECT current_database()").fetchone() == ("budgets",)
    assert server.socket_dir.stat().st_mode & 0o777 == 0o700
    if os.geteuid() == 0:
        # PostgreSQL refuses root, so it runs as a system user of its own.
        assert server.data.stat().st_uid == pwd.getpwnam(embedded_postgres.SERVER_USER).pw_uid


@pytest.mark.slow
def test_start_reuses_a_running_server_and_stop_ends_it(server_var_dir: Path) -> None:
    server = embedded_postgres.start(var_dir=server_var_dir)
    pid = _postmaster_pid(server)
    assert embedded_postgres.start(var_dir=server_var_dir) == server
    assert _postmaster_pid(server) == pid
    assert embedded_postgres.stop(var_dir=server_var_dir) is True
    assert not embedded_postgres.is_running(var_dir=server_var_dir)
    assert embedded_postgres.stop(var_dir=server_var_dir) is False
    # Started again on the data it had: the database is still there.
    embedded_postgres.start(var_dir=server_var_dir)
    with psycopg.connect(server.url()) as db:
        assert db.execute("SELECT current_database()").fetchone() == ("budgets",)


def test_a_short_socket_directory_someone_else_made_is_refused(tmp_path: Path) -> None:
    var = tmp_path / ("d" * 100) / "var"
    planted = embedded_postgres.server_at(var_dir=var).socket_dir
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    try:
        with pytest.raises(EmbeddedPostgresError, match="must be a directory owned by"):
            embedded_postgres.start(var_dir=var)
        assert not (var / "postgres" / "data").exists()
    finally:
        shutil.rmtree(planted)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_a_checkout_in_a_private_directory_is_opened_for_traversal_and_starts(
    server_var_dir: Path,
) -> None:
    private = server_var_dir.parent
    private.chmod(0o700)  # as `mktemp -d` makes it

    server = embedded_postgres.start(var_dir=server_var_dir)

    assert private.stat().st_mode & 0o777 == 0o701  # others may pass through, not list
    with psycopg.connect(server.url()) as db:
        assert db.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.slow
def test_a_tcp_port_is_opened_on_this_machine_only_when_asked(server_var_dir: Path) -> None:
    import socket
    import subprocess
    import sys

    from tests.processes import ROOT

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "VAR_DIR": str(server_var_dir), "EMBEDDED_POSTGRES_TCP_PORT": str(port)}
    command = [sys.executable, "-m", "apps.core.embedded_postgres"]
    started = subprocess.run([*command, "start"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    try:
        url = f"postgresql://postgres@127.0.0.1:{port}/budgets"
        with psycopg.connect(url) as db:
            assert db.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    finally:
        subprocess.run([*command, "stop"], cwd=ROOT, env=env, check=True, capture_output=True)
