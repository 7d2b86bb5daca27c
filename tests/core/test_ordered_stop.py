"""Ctrl-C on a Procfile run through honcho: the processes stop in their turn, the Celery
worker shuts down warm with no ERROR line, and nothing is left behind.

honcho itself sends SIGTERM to every process at once and SIGKILL five seconds after the
first one ends; ``apps.core.ordered_stop`` puts them in order under it. The stand-ins for
the traffic, the web server and the scheduler write down, when their SIGTERM comes, which
commands of the stack still run; the worker is a real one, with a pool of two processes.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from apps.core.ordered_stop import OrderedStop, _status, main, running
from tests.processes import ROOT, process_env, wait_for

# A stand-in: says it started, and on SIGTERM records the commands still running (their
# marker files), takes ``delay`` seconds to finish, and exits 0.
STAND_IN = """
import json, os, signal, sys, time
from pathlib import Path
name, delay, out = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
run = Path(os.environ["VAR_DIR"]) / "run"
def stop(signum, frame):
    still = sorted(p.stem for p in run.glob("*.pid") if p.stem != name)
    (out / f"{name}.json").write_text(json.dumps({"at": time.time(), "running": still}))
    time.sleep(delay)
    print(f"{name} stopped cleanly", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(f"{name} up", flush=True)
while True:
    time.sleep(0.1)
"""


def procfile(tmp_path: Path) -> Path:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    python = sys.executable
    wrap = f"exec {python} -m apps.core.ordered_stop --together"
    stand_in = f"{python} {script}"
    worker = (
        f"{python} -m celery -A budgets_site worker -Q ordered-stop-test --concurrency 2 "
        f"--loglevel INFO --without-gossip --without-mingle --hostname ordered-{os.getpid()}@%h"
    )
    lines = [
        f"web: {wrap} --name web --after traffic --after worker -- {stand_in} web 0 {tmp_path}",
        f"worker: {wrap} --name worker --after traffic --grace 25 -- {worker}",
        f"scheduler: {wrap} --name scheduler --after traffic -- {stand_in} scheduler 0.5 "
        f"{tmp_path}",
        f"traffic: {wrap} --name traffic --grace 8 -- {stand_in} traffic 1.0 {tmp_path}",
    ]
    path = tmp_path / "Procfile"
    path.write_text("\n".join(lines) + "\n")
    return path


def _stack_processes(var_dir: Path) -> list[str]:
    found = []
    needle = f"VAR_DIR={var_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_ctrl_c_stops_traffic_then_the_worker_warm_then_the_rest(tmp_path: Path) -> None:
    var_dir = tmp_path / "var"
    env = process_env(VAR_DIR=str(var_dir))
    log_path = tmp_path / "honcho.log"
    with log_path.open("wb") as log:
        honcho = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", str(procfile(tmp_path))],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        up = wait_for(
            lambda: (
                "ready." in log_path.read_text()
                and all(f"{name} up" in log_path.read_text() for name in ("web", "traffic"))
            ),
            timeout=45,
        )
        assert up, log_path.read_text()[-4000:]
        began = time.time()
        os.killpg(honcho.pid, signal.SIGINT)  # Ctrl-C reaches honcho's process group
        honcho.wait(timeout=45)
    finally:
        if honcho.poll() is None:
            os.killpg(honcho.pid, signal.SIGKILL)
            honcho.wait()
    output = log_path.read_text()
    stopped = {
        name: json.loads((tmp_path / f"{name}.json").read_text())
        for name in ("traffic", "web", "scheduler")
    }

    # Traffic first, while everything else still runs...
    assert stopped["traffic"]["running"] == ["scheduler", "web", "worker"]
    # ... the scheduler once the traffic had ended, the web server once the worker had too.
    assert "traffic" not in stopped["scheduler"]["running"]
    assert stopped["web"]["running"] in ([], ["scheduler"])
    assert stopped["traffic"]["at"] < stopped["scheduler"]["at"] < time.time()
    assert stopped["traffic"]["at"] + 1.0 <= stopped["web"]["at"]
    # The worker shut down warm, its pool stopped by itself: no ERROR line, no kill.
    assert "Warm shutdown" in output
    assert "ERROR" not in output
    assert "Traceback" not in output
    assert "SIGKILL" not in output
    assert "killed" not in output
    for name in ("web", "worker", "scheduler", "traffic"):
        assert f"{name}.1 stopped (rc=0)" in output, output[-3000:]
    assert time.time() - began < 40
    assert not list((var_dir / "run").glob("*.pid"))
    assert _stack_processes(var_dir) == []


def test_a_command_that_ignores_sigterm_is_killed_with_its_session_after_its_grace(
    tmp_path: Path,
) -> None:
    # A parent that ignores SIGTERM, with a child of its own in the same session.
    pid_file = tmp_path / "grandchild"
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(60)"
    )
    stubborn = OrderedStop(
        name="stubborn", after=[], command=[sys.executable, "-c", code], wait_s=1,
        grace_s=0.5, together=False, directory=tmp_path,
    )  # fmt: skip
    threading.Timer(1.5, stubborn.stop.set).start()  # once it ignores SIGTERM
    began = time.monotonic()
    assert stubborn.run() == 1
    assert time.monotonic() - began < 6
    grandchild = int(pid_file.read_text())
    assert wait_for(
        lambda: not Path(f"/proc/{grandchild}").exists() or _zombie(grandchild), timeout=5
    )
    assert not (tmp_path / "stubborn.pid").exists()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return False


def test_waiting_for_another_command_is_bounded(tmp_path: Path) -> None:
    # A marker naming this test's own process: "running" for as long as the test runs.
    (tmp_path / "forever.pid").write_text(str(os.getpid()))
    polite = OrderedStop(
        name="polite", after=["forever"], wait_s=0.5, grace_s=5, together=True,
        command=[sys.executable, "-c", "import time; time.sleep(60)"], directory=tmp_path,
    )  # fmt: skip
    polite.stop.set()
    began = time.monotonic()
    assert polite.run() == 0  # its command ended by the SIGTERM sent to it: a clean stop
    assert 1.0 <= time.monotonic() - began < 5  # waited 0.5 s before, 0.5 s after
    assert running("forever", tmp_path)


def test_a_marker_left_by_a_killed_process_counts_as_ended(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (tmp_path / "ghost.pid").write_text(gone.stdout.strip())
    (tmp_path / "garbled.pid").write_text("not a pid")
    assert not running("ghost", tmp_path)
    assert not running("garbled", tmp_path)
    assert not running("absent", tmp_path)


def test_a_command_that_ends_by_itself_ends_the_wrapper_with_its_status(tmp_path: Path) -> None:
    failing = OrderedStop(
        name="failing", after=[], command=[sys.executable, "-c", "raise SystemExit(3)"],
        wait_s=1, grace_s=1, together=True, directory=tmp_path,
    )  # fmt: skip
    assert failing.run() == 3


@pytest.mark.parametrize(
    ("returncode", "sent", "status"),
    [(0, True, 0), (2, False, 2), (-signal.SIGTERM, True, 0), (-signal.SIGTERM, False, 143),
     (-signal.SIGKILL, True, 137)],
)  # fmt: skip
def test_the_exit_status_counts_only_our_own_sigterm_as_clean(
    returncode: int, sent: bool, status: int
) -> None:
    assert _status(returncode, sent=sent) == status


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit):
        main(["--name", "web"])
