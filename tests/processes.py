"""Start real processes (Celery worker, web server) against the test database."""

import os
import signal
import socket
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
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``celery worker`` process consuming our queues, stopped gracefully after use.

    With ``beat`` it also runs the periodic schedule (``-B``), keeping its state file
    next to the log; ``env`` adds environment variables (settings) for that process.
    Yields the main process (``pool_children`` finds the processes that run the tasks).
    """
    command = [
        sys.executable, "-m", "celery", "-A", "budgets_site", "worker",
        "-Q", queues, "--concurrency", "1", "--loglevel", "INFO",
        "--without-gossip", "--without-mingle", "--hostname", f"test-{os.getpid()}@%h",
    ]  # fmt: skip
    if beat:
        command += ["-B", "--schedule", str(log_path.with_suffix(".beat-schedule"))]
    with running(command, log_path=log_path, env=process_env(**(env or {}))) as proc:
        yield proc


def pool_children(pid: int) -> list[int]:
    """The processes ``pid`` started: a celery worker's pool, which runs its tasks."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in children.read_text().split()] if children.exists() else []


@contextmanager
def running(
    command: list[str], *, log_path: Path, env: dict[str, str], stop_timeout: float = 20
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` run from the checkout with its output in ``log_path``; stopped with
    SIGTERM after use (killed if it does not stop within ``stop_timeout``)."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=stop_timeout)
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class WebServer:
    url: str
    worker_pid: int  # the one gunicorn worker process, which serves every request


@contextmanager
def web_server(log_path: Path, *, env: dict[str, str] | None = None) -> Iterator[WebServer]:
    """gunicorn serving the app from one synchronous worker (so that a request that would
    hang it shows), against the test database, stopped after use; ``env`` adds
    environment variables (settings) for it."""
    url = f"http://127.0.0.1:{free_port()}"
    command = [
        sys.executable, "-m", "gunicorn", "budgets_site.wsgi", "--workers", "1",
        "--bind", url.removeprefix("http://"), "--graceful-timeout", "5", "--timeout", "120",
    ]  # fmt: skip
    with running(command, log_path=log_path, env=process_env(**(env or {}))) as proc:
        if not wait_for(lambda: _answers(url) or proc.poll() is not None, timeout=60):
            raise RuntimeError(f"gunicorn did not answer:\n{log_path.read_text()[-4000:]}")
        if proc.poll() is not None:
            raise RuntimeError(f"gunicorn stopped:\n{log_path.read_text()[-4000:]}")
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        yield WebServer(url=url, worker_pid=int(children[0]))


def _answers(url: str) -> bool:
    try:
        with urlopen(f"{url}/healthz", timeout=2) as response:  # noqa: S310 - our own server
            return bool(response.status == 200)
    except OSError:
        return False
