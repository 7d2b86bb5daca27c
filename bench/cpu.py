"""CPU time of the processes under test, read from /proc: to report CPU per span.

Wall-clock throughput on a shared machine moves with whatever else runs; the CPU
the web process, the worker and their PostgreSQL backends spend per span moves
much less, so both are reported side by side.
"""

import os
from dataclasses import dataclass

from django.db import connection

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) * TICK_S


def _tree(root: int) -> dict[int, float]:
    """CPU seconds of ``root`` and every process below it."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            stats[int(name)] = stat
    members = {root}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in stats.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return {pid: stats[pid][1] for pid in members if pid in stats}


def _backends() -> dict[int, float]:
    """CPU seconds of the PostgreSQL backends serving this database, but this process's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [row[0] for row in cursor.fetchall()]
    return {pid: stat[1] for pid in pids if (stat := _stat(pid)) is not None}


@dataclass
class Snapshot:
    parts: dict[str, dict[int, float]]


class CpuMeter:
    """Snapshots of named process trees plus the database's backends."""

    def __init__(self, **roots: int) -> None:
        self.roots = roots

    def snapshot(self) -> Snapshot:
        parts = {name: _tree(pid) for name, pid in self.roots.items()}
        parts["postgres"] = _backends()
        return Snapshot(parts)

    @staticmethod
    def spent(before: Snapshot, after: Snapshot) -> dict[str, float]:
        """CPU seconds per part between two snapshots; a process started between counts
        from zero, one that ended between is lost (the parts here live for the run)."""
        return {
            name: round(sum(cpu - before.parts[name].get(pid, 0.0) for pid, cpu in now.items()), 2)
            for name, now in after.parts.items()
        }
