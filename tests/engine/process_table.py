"""Reading the process table (/proc) to see a run's worker processes: shared by the signal tests
and bench/reliability_bench.py (a uniquely named module: `conftest` names clash between folders)."""

from __future__ import annotations

import os


def children(pid: int) -> list[int]:
    """The live (not zombie) child processes of `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
