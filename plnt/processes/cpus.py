"""How many CPUs this process may use: the default of `--workers` (API server processes).

`os.cpu_count()` names the machine's cores, not this process's share: a container is
often pinned to a few (`sched_getaffinity`) or given a CFS quota by its CPU limit
(cgroup v2 `cpu.max`, "QUOTA PERIOD" in microseconds, or "max PERIOD" for none). More
event loops than cores only add context switches, so the default is the smaller of the
two, a fractional quota rounded up (1.5 CPUs may still use two cores half the time),
and capped at `CAP` (each API process holds its own watch cache and etcd watches).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
CAP = 8


def quota(cpu_max: Path = CPU_MAX) -> int | None:
    """CPUs the cgroup v2 quota allows (rounded up); None without a quota or a readable file."""
    try:
        fields = cpu_max.read_text().split()
    except OSError:
        return None
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        limit, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    if limit <= 0 or period <= 0:
        return None
    return max(1, math.ceil(limit / period))


def affinity() -> int:
    """CPUs this process may be scheduled on (every core where affinity is unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available(*, cores: int | None = None, cpu_max: Path = CPU_MAX, cap: int = CAP) -> int:
    """The CPUs this process may use: its affinity, limited by the cgroup quota, at most `cap`."""
    count = affinity() if cores is None else cores
    limit = quota(cpu_max)
    if limit is not None:
        count = min(count, limit)
    return max(1, min(count, cap))
