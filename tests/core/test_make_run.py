"""`make run` on a machine with nothing configured: the embedded PostgreSQL server and the
filesystem broker."""

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from apps.core import embedded_postgres
from tests.processes import ROOT, free_port, wait_for

EMBEDDED_UNSET = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "EMAIL_URL", "SECRET_KEY")
# The defaults of `make run` are what is tested: a newcomer's quiet log.
LOG_LEVELS_UNSET = ("LOG_LEVEL", "WORKER_LOG_LEVEL", "REQUEST_LOG_LEVEL")
# Celery's line for each task received and succeeded, and beat's for each one it sends.
ROUTINE_TASK_LINE = re.compile(
    r"Task apps\.\S+\[[0-9a-f-]+\] (received|succeeded)|Scheduler: Sending due task"
)


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
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in EMBEDDED_UNSET + LOG_LEVELS_UNSET}
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
                    "SELECT COUNT(*) FROM ingest_trace t JOIN analysis_stagesample s "
                    "ON s.trace_pk = t.id WHERE t.state IN (1, 2) AND t.pipeline_id IS NOT NULL"
                )
            )

        assert wait_for(demo_trace_analyzed, timeout=120, interval=1), log_path.read_text()[-4000:]
        # Once everything is up, a banner with the address and the demo credentials.
        banner = "Latency Budgets is running."
        assert wait_for(lambda: banner in log_path.read_text(), timeout=30), log_path.read_text()
        output = log_path.read_text()
        assert f"Open      {base}/" in output
        assert 'Sign in   user "demo", password "demo-budgets" (team "demo"' in output
        assert "Ctrl-C stops everything, the embedded PostgreSQL server too" in output
        # Quiet by default: no line per routine task or per accepted request.
        assert not ROUTINE_TASK_LINE.search(output), ROUTINE_TASK_LINE.search(output)
        assert '"POST /v1/traces HTTP/1.1" 200' not in output
        # No mail is written out whole (the demo's own address is verified, so it gets no
        # confirmation; tests/core/test_mail_backend.py shows the one line an alert makes).
        assert "<html" not in log_path.read_text().lower()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            stop = [sys.executable, "-m", "apps.core.embedded_postgres", "stop"]
            subprocess.run(stop, cwd=ROOT, env=env, check=True, capture_output=True)
        left_behind = _processes_with(f"VAR_DIR={server_var_dir}".encode())
    # Ctrl-C stops the app: nothing is left listening on the port...
    assert _get(f"{base}/healthz")[0] == 0
    # ... in order and cleanly: the traffic sent its last spans to a web server still up,
    # the worker shut down warm, nothing was killed, no error was logged.
    stopping = log_path.read_text().split("SIGINT received", 1)[1]
    assert "export failures: 0 (0 spans)" in stopping, stopping
    assert "Warm shutdown" in stopping
    for bad in ("ERROR", "Traceback", "SIGKILL", "killed"):
        assert bad not in stopping, stopping
    for name in ("traffic", "worker", "web", "scheduler"):
        assert f"{name}.1 stopped (rc=0)" in stopping, stopping
    # ... and the embedded server with it: no process, no pid file, no socket.
    assert "PostgreSQL stopped" in log_path.read_text()[-2000:]
    assert not embedded_postgres.is_running(var_dir=server.var_dir)
    assert not (server.data / "postmaster.pid").exists()
    assert not (server.socket_dir / f".s.PGSQL.{embedded_postgres.PORT}").exists()
    assert not _processes_with(str(server.data).encode(), source="cmdline")
    # Every process `make run` started had our VAR_DIR in its environment: none is left.
    assert not left_behind, left_behind


def _processes_with(needle: bytes, *, source: str = "environ") -> list[str]:
    """The command lines of the processes whose environment (or command line) holds
    ``needle``; zombies, which have neither any more, are not counted."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / source).read_bytes():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # gone meanwhile, or another user's
            continue
    return found
