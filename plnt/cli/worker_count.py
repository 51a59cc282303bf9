"""`--workers N` of `plnt up` and `plnt serve`: how many API server processes share the port.

Unset, it is the CPUs this process may use (`plnt.processes.cpus`: affinity, a cgroup
quota, at most 8): one event loop per core. `1` is a single process, as before workers.
"""

from __future__ import annotations

import typer

from plnt.processes import cpus

HELP = (
    "API server processes sharing the port, each on a core of its own "
    "(default: the CPUs this process may use, at most 8; 1: a single process)."
)


def resolve(workers: int | None) -> int:
    """The worker count for `--workers` (None: automatic); `BadParameter` below 1."""
    if workers is None:
        return cpus.available()
    if workers < 1:
        raise typer.BadParameter(
            f"{workers} is not a worker count (at least 1)", param_hint="--workers"
        )
    return workers
