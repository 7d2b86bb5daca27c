"""CPU time of the processes under test, read from /proc: to report CPU per span.

Wall-clock throughput on a shared machine moves with whatever else runs; the CPU
the web process, the worker and PostgreSQL spend per span moves much less, so both
are reported side by side. A process's own time plus the time of its children it
has reaped (``cutime``/``cstime``) is counted, so a PostgreSQL backend that served
a request and exited still counts, through the postmaster. With spans in ClickHouse, its
servers (every replica on this machine) and ZooKeeper count as well, each in its own
column: they are servers like PostgreSQL, found by name rather than started by the bench.
"""

import os
import threading
from dataclasses import dataclass

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


# ``/proc/<pid>/stat`` names a process by its first 15 characters.
CLICKHOUSE_NAME = "clickhouse-server"[:15]


@dataclass(frozen=True)
class _Process:
    name: str
    parent: int
    own_s: float
    reaped_s: float


def _processes() -> dict[int, _Process]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue  # ended meanwhile
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        found[int(entry)] = _Process(
            name=name,
            parent=int(fields[1]),
            own_s=(int(fields[11]) + int(fields[12])) * TICK_S,
            reaped_s=(int(fields[13]) + int(fields[14])) * TICK_S,
        )
    return found


def _settled_processes(tries: int = 5) -> dict[int, _Process]:
    """The processes, read again until two readings name the same ones. A backend that
    ends while /proc is read, after its postmaster's line, is in neither its own line nor
    the postmaster's reaped time: a reading then loses all its CPU (seen once as a
    phase's PostgreSQL total below its own backends' share)."""
    processes = _processes()
    for _ in range(tries):
        again = _processes()
        if again.keys() == processes.keys():
            return again
        processes = again
    return processes


def _tree_s(processes: dict[int, _Process], root: int) -> float:
    members = {root}
    grew = True
    while grew:
        before = len(members)
        members |= {pid for pid, p in processes.items() if p.parent in members}
        grew = len(members) > before
    return sum(processes[pid].own_s + processes[pid].reaped_s for pid in members)


def _postgres_s(processes: dict[int, _Process]) -> float:
    """Every PostgreSQL process, plus the backends its postmaster has reaped."""
    total = 0.0
    for process in processes.values():
        if process.name == "postgres":
            total += process.own_s
            parent = processes.get(process.parent)
            if parent is None or parent.name != "postgres":  # the postmaster
                total += process.reaped_s
    return total


def _clickhouse_s(processes: dict[int, _Process]) -> float:
    """Every ClickHouse server on the machine (each replica is a process of its own)."""
    return sum(p.own_s + p.reaped_s for p in processes.values() if p.name == CLICKHOUSE_NAME)


def _zookeeper_s(processes: dict[int, _Process]) -> float:
    """ZooKeeper: a ``java`` process, told from other Java by its command line."""
    total = 0.0
    for pid, process in processes.items():
        if process.name != "java":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"zookeeper" not in cmdline.read().lower():
                    continue
        except OSError:
            continue
        total += process.own_s + process.reaped_s
    return total


def machine_busy_s() -> float:
    """CPU seconds every core has spent on anything but idling (``/proc/stat``): the
    measured processes' share of it says how much else ran meanwhile."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) * TICK_S


class CpuMeter:
    """CPU seconds of named process trees and of PostgreSQL, read at two moments."""

    def __init__(self, **roots: int) -> None:
        self.roots = roots

    def snapshot(self) -> dict[str, float]:
        return self._parts(_settled_processes())

    def _parts(self, processes: dict[int, _Process]) -> dict[str, float]:
        parts = {name: _tree_s(processes, pid) for name, pid in self.roots.items()}
        parts["postgres"] = _postgres_s(processes)
        return parts

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: round(after[name] - before[name], 2) for name in after}


class ClickHouseCpuMeter(CpuMeter):
    """The same, and the ClickHouse servers and ZooKeeper, for spans kept in ClickHouse."""

    def _parts(self, processes: dict[int, _Process]) -> dict[str, float]:
        parts = super()._parts(processes)
        parts["clickhouse"] = _clickhouse_s(processes)
        parts["zookeeper"] = _zookeeper_s(processes)
        return parts


class DatabaseBackends:
    """CPU seconds of the PostgreSQL backends serving one database, told by their process
    title (``postgres: <cluster>: <user> <database> <client> <state>``).

    The ``postgres`` column counts every PostgreSQL process, so on a server shared with
    other databases it counts their backends too; this counts only the bench's. A
    backend's CPU is read every ``interval`` seconds while it lives: one that ends
    between two readings loses its last moments, and the server's own processes (WAL
    writer, checkpointer) are not in it, so it is a lower bound.
    """

    def __init__(self, database: str, interval: float = 1.0) -> None:
        self.title = f" {database} ".encode()
        self.interval = interval
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def _read(self) -> dict[int, float]:
        found = {}
        for pid, process in _processes().items():
            if process.name != "postgres":
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if self.title not in cmdline.read():
                        continue
            except OSError:
                continue
            found[pid] = process.own_s
        return found

    def start(self) -> None:
        self.first = self._read()
        self.last = dict(self.first)
        self.thread.start()

    def _sample_until_stopped(self) -> None:
        while not self.stopped.wait(self.interval):
            self.last |= self._read()

    def spent(self) -> float:
        """CPU seconds since ``start``; stops the readings."""
        self.stopped.set()
        self.thread.join()
        self.last |= self._read()
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())
