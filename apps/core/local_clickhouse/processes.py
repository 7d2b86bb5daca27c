"""Start, find, wait for and stop the cluster's processes, with pid files and no service."""

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from apps.core.local_clickhouse.layout import BASE_PORT_VARIABLE, LocalClickHouseError

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

# The children this process started, kept to reap them (a killed child is a zombie until
# reaped, which os.kill(pid, 0) cannot tell from a live process).
_children: dict[int, subprocess.Popen[bytes]] = {}


def executable(name: str, *, fallback: str) -> str:
    path = shutil.which(name) or (fallback if Path(fallback).exists() else None)
    if path is None:
        raise LocalClickHouseError(
            f"{name} not found: apt-get install clickhouse-server clickhouse-client zookeeper"
        )
    return path


def check_ports_free(host: str, ports: list[int], *, what: str) -> None:
    """Fail unless each port is free: a server of another cluster (or anything else) there
    would answer the readiness checks in place of the one about to fail to bind it."""
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise LocalClickHouseError(
                    f"{what} cannot listen on {host}:{port} ({exc.strerror}): another cluster "
                    f"or server has it; choose another {BASE_PORT_VARIABLE}"
                ) from exc


def launch(command: list[str], *, cwd: Path, log: Path, pid_file: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own (a terminal's Ctrl-C does not reach it;
    ``stop`` does), its output appended to ``log``, its pid written to ``pid_file``."""
    with log.open("ab") as out:
        process = subprocess.Popen(  # noqa: S603 (our command line, absolute paths)
            command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    _children[process.pid] = process
    pid_file.write_text(f"{process.pid}\n")
    return process


def live_pid(pid_file: Path, *, marker: str) -> int | None:
    """The pid in ``pid_file`` if that process runs and its command line has ``marker``
    (its config file's path: a pid reused by another process does not count)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ValueError):
        return None
    return pid if marker in cmdline and _alive(pid) else None


def _alive(pid: int) -> bool:
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def terminate(pids: dict[Path, int], *, sig: signal.Signals = signal.SIGTERM) -> None:
    """Signal each process and wait until all are gone (SIGKILL once the timeout passes);
    then remove their pid files (the keys)."""
    for pid in pids.values():
        with suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(_alive(pid) for pid in pids.values()):
        if time.monotonic() > deadline:
            for pid in pids.values():
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + STOP_TIMEOUT_S
        time.sleep(0.1)
    for pid_file, pid in pids.items():
        _children.pop(pid, None)
        pid_file.unlink(missing_ok=True)


def wait_until(
    ready: Callable[[], bool], *, process: subprocess.Popen[bytes] | None, what: str, log: Path
) -> None:
    """Poll ``ready`` until it is true; fail, naming ``log``, if ``process`` (the one just
    started, if any) exits or the timeout passes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    error: Exception | None = None
    while True:
        try:
            if ready():
                return
        except (OSError, LocalClickHouseError) as exc:
            error = exc
        if process is not None and process.poll() is not None:
            raise LocalClickHouseError(f"{what} exited with {process.returncode}: see {log}")
        if time.monotonic() > deadline:
            raise LocalClickHouseError(
                f"{what} not ready after {START_TIMEOUT_S:g} s ({error}): see {log}"
            )
        time.sleep(0.2)
