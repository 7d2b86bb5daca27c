"""Start real processes (Celery worker, web server) against the test database."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode
from urllib.request import urlopen

from django.conf import settings
from django.db import connection

from tests.faults.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """A DATABASE_URL naming the database the tests are using right now."""
    db = settings.DATABASES["default"]
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    name = connection.settings_dict["NAME"]
    if host.startswith("/"):
        # A Unix socket directory (the embedded server's) goes in the query, as libpq has it.
        query = urlencode({"host": host, "port": port})
        return f"postgres://{user}{password}@/{name}?{query}"
    return f"postgres://{user}{password}@{host}:{port}/{name}"


def process_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="budgets_site.settings_test",
        DATABASE_URL=test_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@contextmanager
def celery_worker(
    log_path: Path,
    queues: str = "ingest,rollup,alerts,whatif",
    *,
    beat: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[None]:
    """A real ``celery worker`` process consuming our queues, stopped gracefully after use.

    With ``beat`` it also runs the periodic schedule (``-B``), keeping its state file
    next to the log; ``env`` adds environment variables (settings) for that process.
    """
    command = [
        sys.executable, "-m", "celery", "-A", "budgets_site", "worker",
        "-Q", queues, "--concurrency", "1", "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--hostname", f"test-{os.getpid()}@%h",
    ]  # fmt: skip
    if beat:
        command += ["-B", "--schedule", str(log_path.with_suffix(".beat-schedule"))]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=process_env(**(env or {})), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Gracefully, then for good if it has not stopped within 20 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(condition: Callable[[], bool], *, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


@dataclass(frozen=True)
class WebServer:
    url: str
    worker_pid: int  # the one gunicorn worker process, which serves every request


def _answers(url: str) -> bool:
    try:
        with urlopen(f"{url}/healthz", timeout=2) as response:  # noqa: S310 - our own server
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def web_server(log_path: Path, *, env: dict[str, str] | None = None) -> Iterator[WebServer]:
    """gunicorn serving the app from one synchronous worker, against the test database,
    stopped after use; ``env`` adds environment variables (settings) for it."""
    url = f"http://127.0.0.1:{free_port()}"
    command = [
        sys.executable, "-m", "gunicorn", "budgets_site.wsgi", "--workers", "1",
        "--bind", url.removeprefix("http://"), "--timeout", "120",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=process_env(**(env or {})), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            if not wait_for(lambda: _answers(url) or proc.poll() is not None, timeout=60):
                raise RuntimeError(f"gunicorn did not answer:\n{log_path.read_text()[-4000:]}")
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            yield WebServer(url=url, worker_pid=int(children[0]))
        finally:
            _stop(proc)
