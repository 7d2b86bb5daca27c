"""The whole stack as production runs it, against the suite's private servers.

gunicorn serving the app, one Celery worker on every queue and ``celery beat``, each a
subprocess in a session of its own, so that a fault can SIGKILL a worker together with
its pool processes, as a machine or a container dying would. A supervisor restarts a
process that exits on its own, as systemd or a container runtime would in production,
and records the exit: the cases report every one.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.faults.servers import PrivatePostgres, PrivateRedis
from tests.processes import ROOT, free_port, wait_for

# Short intervals, so that a trace is analyzed seconds after its last span and each
# fault case fits in a minute or two; everything else keeps production's defaults.
TRACE_IDLE_SECONDS = 3.0
TRACE_SETTLE_SECONDS = 1.0
READY_TIMEOUT_S = 120.0
# What a process manager waits before restarting a process that exited (systemd: 100 ms).
RESTART_DELAY_S = 1.0
# The settings that name servers; their ``_FILE`` twins would win over the values here.
_SERVER_SETTINGS = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "EMAIL_URL", "SECRET_KEY")


class Process:
    """A subprocess of the stack; its log is appended to across restarts."""

    def __init__(self, name: str, command: list[str], *, log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.command = command
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_offset = 0
        # Down on purpose (never started, stopped, killed by a fault): not restarted.
        self.meant_down = True
        self.lock = threading.RLock()

    def start(self) -> None:
        with self.lock:
            self.log_offset = self.log.stat().st_size if self.log.exists() else 0
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    self.command,
                    cwd=ROOT,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.meant_down = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_since_start(self) -> str:
        with self.log.open("rb") as log:
            log.seek(self.log_offset)
            return log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL the process and every process it started, at once."""
        with self.lock:
            self.meant_down = True
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        _wait_group_gone(self.proc.pid)

    def stop(self) -> None:
        with self.lock:
            self.meant_down = True
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        _wait_group_gone(self.proc.pid, kill=True)

    def tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def _wait_group_gone(pgid: int, *, kill: bool = False) -> None:
    """Pool processes outlive their parent for a moment; none may hold a connection on."""

    def gone() -> bool:
        try:
            os.killpg(pgid, signal.SIGKILL if kill else 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(gone, timeout=30, interval=0.05)


class Supervisor:
    """Restarts the processes that exit when they were not meant to, noting each exit."""

    def __init__(self, processes: list[Process]) -> None:
        self.processes = processes
        self.exits: list[tuple[float, str]] = []  # (time.time(), what happened)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def exits_since(self, moment: float) -> list[str]:
        return [what for at, what in self.exits if at >= moment]

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for process in self.processes:
                with process.lock:
                    proc = process.proc
                    if process.meant_down or proc is None or proc.poll() is None:
                        continue
                    self.exits.append((time.time(), f"{process.name} exited ({proc.returncode})"))
                    time.sleep(RESTART_DELAY_S)
                    process.start()


@dataclass(frozen=True)
class World:
    """One fault case's team, as ``tests.faults.world`` created it."""

    team_id: int
    token: str
    pipeline_id: int
    stage_ids: dict[str, int]
    rule_id: int
    channel_id: int


class Stack:
    def __init__(self, root: Path, *, logs: Path, redis_binary: str | None) -> None:
        self.root = root
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.postgres = PrivatePostgres(root / "pg")
        self.redis = PrivateRedis(root / "redis", redis_binary) if redis_binary else None
        self.web_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.web_port}"
        self.env = self._env()
        python = sys.executable
        self.web = Process(
            "web",
            [
                python, "-m", "gunicorn", "budgets_site.wsgi", "--workers", "2",
                "--worker-class", "gthread", "--threads", "4",
                "--bind", f"127.0.0.1:{self.web_port}", "--graceful-timeout", "5",
            ],
            log=self.logs / "web.log",
            env=self.env,
        )  # fmt: skip
        self.worker = Process(
            "worker",
            [
                python, "-m", "celery", "-A", "budgets_site", "worker",
                "-Q", "ingest,rollup,alerts,whatif", "--concurrency", "2", "--loglevel", "INFO",
                "--without-gossip", "--without-mingle", "--hostname", "faults@%h",
            ],
            log=self.logs / "worker.log",
            env=self.env,
        )  # fmt: skip
        self.beat = Process(
            "beat",
            [
                python, "-m", "celery", "-A", "budgets_site", "beat", "--loglevel", "INFO",
                "--schedule", str(root / "beat-schedule"),
            ],
            log=self.logs / "beat.log",
            env=self.env,
        )  # fmt: skip
        self.supervisor = Supervisor([self.web, self.worker, self.beat])

    def _env(self) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if k.removesuffix("_FILE") not in _SERVER_SETTINGS
        }
        var_dir = self.root / "var"
        var_dir.mkdir(exist_ok=True)
        env.update(
            DJANGO_SETTINGS_MODULE="budgets_site.settings_test",
            DATABASE_URL=self.postgres.url(),
            VAR_DIR=str(var_dir),
            SECRET_KEY="faults-only-secret-key-not-used-anywhere-else-0123456789",
            DEBUG="false",
            PYTHONUNBUFFERED="1",
            TRACE_IDLE_SECONDS=str(TRACE_IDLE_SECONDS),
            TRACE_SETTLE_SECONDS=str(TRACE_SETTLE_SECONDS),
            # The webhook receiver listens on loopback.
            WEBHOOK_ALLOW_PRIVATE_IPS="true",
            LOG_LEVEL="INFO",
        )
        if self.redis is not None:
            env.update(CELERY_BROKER_URL=self.redis.url(0), REDIS_URL=self.redis.url(1))
        else:
            # The embedded default: the filesystem broker under VAR_DIR, a cache per process.
            env.update(CELERY_BROKER_URL="filesystem://localhost/", REDIS_URL="")
        return env

    def start(self) -> None:
        self.postgres.create()
        if self.redis is not None:
            self.redis.start()
        self.manage("migrate", "--noinput", "--verbosity", "0")
        self.web.start()
        self.beat.start()
        self.worker_start()
        if not wait_for(self.web_ready, timeout=READY_TIMEOUT_S, interval=0.2):
            raise RuntimeError(f"gunicorn did not answer:\n{self.web.tail()}")
        self.supervisor.start()

    def stop(self) -> None:
        self.supervisor.stop()
        for process in (self.worker, self.beat, self.web):
            process.stop()
        if self.redis is not None:
            self.redis.stop()
        self.postgres.stop()

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-4000:]}")
        return done.stdout

    def web_ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.web_port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def worker_start(self) -> None:
        self.worker.start()
        ready = wait_for(
            lambda: " ready." in self.worker.log_since_start() or not self.worker.running,
            timeout=READY_TIMEOUT_S,
            interval=0.1,
        )
        if not ready or not self.worker.running:
            raise RuntimeError(f"the worker did not start:\n{self.worker.tail()}")

    def world_create(self, slug: str, receiver_url: str) -> World:
        """A team for one case: its token, pipeline, stages, webhook channel and rule."""
        done = subprocess.run(
            [sys.executable, "-m", "tests.faults.world", slug, receiver_url],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"creating the team failed:\n{done.stderr[-4000:]}")
        return World(**json.loads(done.stdout.strip().splitlines()[-1]))

    def logs_tail(self) -> str:
        return "\n".join(
            f"--- {p.name} ---\n{p.tail(3000)}" for p in (self.web, self.worker, self.beat)
        )
