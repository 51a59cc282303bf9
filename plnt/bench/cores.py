"""Giving one measured process a core of its own (`--own-core` of `bench model` and `bench saga`).

Why: on a two-core machine every process shares both cores, so a process that holds a core
for long (the model server's generation thread, a Temporal server starting workflows) and
plnt's processes take cycles from each other, and a ratio against that process measures
the sharing as much as plnt. In a real deployment that process has cores, or nodes, of its
own: a model has its device, and a cluster's Temporal runs on its own nodes. `own_core`
reproduces that shape: the named process gets the first core, and this process (with
every child it starts meanwhile, which inherit its cores) gets the rest, until the block
ends and this process has its cores back (a benchmark's later phases share them again).

Errors: `BenchmarkError` on a machine with fewer than two cores.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from plnt.bench.apiserver import BenchmarkError


@contextlib.contextmanager
def own_core(pid: int, name: str) -> Iterator[str]:
    """Give process `pid`'s threads the first core and this process's threads the rest,
    yielding the split as printed (`name` names `pid`); on the way out, give this process's
    threads back the cores they had. Threads started later inherit their creator's cores,
    so pinning every thread now pins them all."""
    mine = os.sched_getaffinity(0)
    cores = sorted(mine)
    if len(cores) < 2:
        raise BenchmarkError("--own-core needs at least two cores")
    first, rest = {cores[0]}, set(cores[1:])
    _pin(pid, first)
    _pin(os.getpid(), rest)
    try:
        yield f"{name} on core {cores[0]}, the rest on {','.join(map(str, sorted(rest)))}"
    finally:
        _pin(os.getpid(), mine)


def _pin(pid: int, wanted: set[int]) -> None:
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), wanted)


def own_core_if(wanted: bool, pid: int | None, name: str) -> contextlib.AbstractContextManager[str]:
    """`own_core(pid, name)` when `--own-core` asked for it, else a block that changes
    nothing and yields "" (every process shares the cores)."""
    if not wanted:
        return contextlib.nullcontext("")
    if pid is None:
        raise BenchmarkError(f"--own-core: {name} has no process")
    return own_core(pid, name)
