"""CPU time of the processes under test, read from /proc: to report CPU per span.

Wall-clock throughput on a shared machine moves with whatever else runs; the CPU
the web process, the worker and PostgreSQL spend per span moves much less, so both
are reported side by side. A process's own time plus the time of its children it
has reaped (``cutime``/``cstime``) is counted, so a PostgreSQL backend that served
a request and exited still counts, through the postmaster.
"""

import os
from dataclasses import dataclass

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


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


class CpuMeter:
    """CPU seconds of named process trees and of PostgreSQL, read at two moments."""

    def __init__(self, **roots: int) -> None:
        self.roots = roots

    def snapshot(self) -> dict[str, float]:
        processes = _processes()
        parts = {name: _tree_s(processes, pid) for name, pid in self.roots.items()}
        parts["postgres"] = _postgres_s(processes)
        return parts

    @staticmethod
    def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {name: round(after[name] - before[name], 2) for name in after}
