"""`make run` on a machine with nothing configured: the embedded PostgreSQL server and the
filesystem broker."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from apps.core import embedded_postgres
from tests.processes import ROOT, wait_for

EMBEDDED_UNSET = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "EMAIL_URL", "SECRET_KEY")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


@pytest.mark.slow
def test_make_run_starts_web_worker_and_scheduler_on_the_embedded_default(
    tmp_path: Path, server_var_dir: Path
) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_UNSET}
    env.update(VAR_DIR=str(server_var_dir), PORT=str(port), DJANGO_SETTINGS_MODULE="")
    env.pop("DJANGO_SETTINGS_MODULE")
    log_path = tmp_path / "make-run.log"
    server = embedded_postgres.server_at(var_dir=server_var_dir)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        ready = wait_for(lambda: _get(f"{base}/readyz")[0] == 200, timeout=120, interval=0.5)
        assert ready, log_path.read_text()[-4000:]
        _status, body = _get(f"{base}/readyz")
        assert json.loads(body)["checks"]["broker"] == {"ok": True}
        assert _get(f"{base}/accounts/login/")[0] == 200

        # The scheduler's heartbeat went through the filesystem broker to the worker,
        # which wrote it to the embedded server: all three processes are alive and wired.
        def count(query: str) -> int:
            with psycopg.connect(server.url()) as db:
                row = db.execute(query).fetchone()
            return int(row[0]) if row else 0

        def heartbeat_recorded() -> bool:
            return bool(count("SELECT COUNT(*) FROM core_workerheartbeat"))

        assert wait_for(heartbeat_recorded, timeout=60, interval=0.5), log_path.read_text()[-4000:]

        # Demo traffic flows through the official exporter, the ingest endpoint and the
        # worker: traces of the demo pipeline come out analyzed, with stage samples.
        def demo_trace_analyzed() -> bool:
            return bool(
                count(
                    "SELECT COUNT(*) FROM ingest_trace t JOIN rollups_stagesample s "
                    "ON s.trace_pk = t.id WHERE t.state IN (1, 2) AND t.pipeline_id IS NOT NULL"
                )
            )

        assert wait_for(demo_trace_analyzed, timeout=120, interval=1), log_path.read_text()[-4000:]
        output = log_path.read_text()
        assert "demo-budgets" in output  # the demo credentials are printed
        assert f"http://127.0.0.1:{port}" in output
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # The database outlives Ctrl-C, for the next `make run`, until it is stopped.
        running = embedded_postgres.is_running(var_dir=server.var_dir)
        stop = [sys.executable, "-m", "apps.core.embedded_postgres", "stop"]
        subprocess.run(stop, cwd=ROOT, env=env, check=True, capture_output=True)
    # Ctrl-C stops the app: nothing is left listening on the port.
    assert _get(f"{base}/healthz")[0] == 0
    assert running
    assert not embedded_postgres.is_running(var_dir=server.var_dir)
