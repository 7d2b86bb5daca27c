"""Run one process of a Procfile so that, when the whole stack stops, it stops in its turn.

honcho stops a Procfile on Ctrl-C by sending SIGTERM to every process group at once, and
SIGKILL to whatever still runs five seconds after the first process ended. At once is the
wrong order for ours: the web server went first, so the demo traffic could not send its
last spans, and the signal reached the Celery worker's pool processes directly, which the
worker then reported as two ERROR lines before being killed. Five seconds is also less
than a worker's warm shutdown takes on the filesystem broker (about nine).

So each Procfile line runs its command through this module::

    python -m apps.core.ordered_stop --name worker --after traffic -- celery -A … worker

The command runs in a session of its own, so honcho's signal (and a terminal's Ctrl-C)
reaches this process only, and a command announces itself with a file under
``VAR_DIR/run/`` for as long as it runs. On SIGTERM or SIGINT this process waits until
the commands named by ``--after`` have ended, then sends SIGTERM to its own command's main
process alone (a Celery worker then shuts down warm and stops its own pool), gives it
``--grace`` seconds, and kills what is left of its session only after that. With
``--together`` it then stays until every command of the checkout has ended, so that
honcho's five seconds start once all is stopped, not at the first of them. Every wait is
bounded (``--wait``, ``--grace``); the exit status is the command's, the SIGTERM sent to it
counting as a clean stop.

Order in ``make run`` (see ``Procfile``): the traffic stops first, its last spans still
reaching the web server; then the worker (warm shutdown) and the scheduler; then the web
server.
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

POLL_S = 0.05


def run_dir() -> Path:
    """Where the processes of one checkout announce themselves (VAR_DIR as the settings
    read it, without loading them: this runs before and beside Django)."""
    default = Path(__file__).resolve().parent.parent.parent / "var"
    return Path(os.environ.get("VAR_DIR") or default) / "run"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process now holds that number
        return True
    return True


def running(name: str, directory: Path) -> bool:
    """Whether the process announced as ``name`` still runs; a file a killed process left
    behind names a process that is gone."""
    try:
        pid = int((directory / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    return _alive(pid)


class OrderedStop:
    def __init__(
        self,
        *,
        name: str,
        after: Sequence[str],
        command: Sequence[str],
        wait_s: float,
        grace_s: float,
        together: bool,
        directory: Path,
    ) -> None:
        self.name = name
        self.after = list(after)
        self.command = list(command)
        self.wait_s = wait_s
        self.grace_s = grace_s
        self.together = together
        self.directory = directory
        self.marker = directory / f"{name}.pid"
        self.stop = threading.Event()

    def _request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop.set()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._request_stop)
        self.directory.mkdir(parents=True, exist_ok=True)
        # Its own session: honcho's signal to our group, and a terminal's Ctrl-C, reach
        # this process only; the command hears from us, in its turn.
        child = subprocess.Popen(self.command, start_new_session=True)  # noqa: S603 - the Procfile's own
        try:
            self.marker.write_text(str(child.pid))
            while child.poll() is None and not self.stop.wait(POLL_S):
                pass
            if child.poll() is not None:  # ended by itself: honcho then stops the rest
                return _status(child.returncode, sent=False)
            self._wait_for(self.after, why="stopping although {} still runs")
            status = self._stop_child(child)
        finally:
            self.marker.unlink(missing_ok=True)
        if self.together:
            self._wait_for(self._others(), why="leaving although {} still runs")
        return status

    def _others(self) -> list[str]:
        return [path.stem for path in self.directory.glob("*.pid") if path != self.marker]

    def _wait_for(self, names: Sequence[str], *, why: str) -> None:
        deadline = time.monotonic() + self.wait_s
        waiting = list(names)
        while waiting:
            waiting = [name for name in waiting if running(name, self.directory)]
            if waiting and time.monotonic() >= deadline:
                _say(f"{self.name}: {why.format(', '.join(waiting))}")
                return
            time.sleep(POLL_S)

    def _stop_child(self, child: subprocess.Popen[bytes]) -> int:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
        try:
            returncode = child.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            _say(f"{self.name}: did not stop within {self.grace_s:g} s of SIGTERM; killed")
            _kill_session(child.pid)
            child.wait()
            return 1
        # What the command left in its session (a worker's pool after a cold exit).
        _kill_session(child.pid)
        return _status(returncode, sent=True)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _status(returncode: int, *, sent: bool) -> int:
    """The command's exit status for honcho: death by the SIGTERM we sent is a clean stop."""
    if returncode < 0:
        return 0 if sent and -returncode == signal.SIGTERM else 128 - returncode
    return returncode


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apps.core.ordered_stop",
        description="Run a Procfile command that stops in its turn when the stack stops.",
    )
    parser.add_argument("--name", required=True, help="This process's name in the Procfile.")
    parser.add_argument(
        "--after", action="append", default=[], help="Stop only once this command has ended."
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="Once stopped, stay until every command of the checkout has ended.",
    )
    parser.add_argument(
        "--wait", type=float, default=30.0, help="Seconds to wait for the others at most (30)."
    )
    parser.add_argument(
        "--grace", type=float, default=10.0, help="Seconds the command has to stop (10)."
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command.")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command after --")
    return OrderedStop(
        name=options.name,
        after=options.after,
        command=command,
        wait_s=options.wait,
        grace_s=options.grace,
        together=options.together,
        directory=run_dir(),
    ).run()


if __name__ == "__main__":
    sys.exit(main())
