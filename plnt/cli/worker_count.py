"""`--workers N` of `plnt up` and `plnt serve`: how many API server processes share the port.

Unset, it is the CPUs this process may use (`plnt.processes.cpus`: affinity, a cgroup
quota, at most 8): one event loop per core. `plnt up` leaves one of them to what runs
beside its API server on the same machine (etcd, Temporal, the deploy worker, runners):
on 2 cores shared with them, a second worker measured no faster for GET, CREATE or
proxied calls and slower for watch fan-out, since every worker's watch cache decodes
every event (docs/benchmarks.md). `1` is a single process, as before workers.
"""

from __future__ import annotations

import typer

from plnt.processes import cpus

HELP = (
    "API server processes sharing the port, each on a core of its own "
    "(default: the CPUs this process may use, at most 8; 1: a single process)."
)
UP_HELP = (
    "API server processes sharing the port, each on a core of its own (default: the CPUs "
    "this process may use less one for etcd, Temporal and runners, at least 1 and at most "
    "8; 1: a single process)."
)


def resolve(workers: int | None, *, spare: int = 0) -> int:
    """The worker count for `--workers` (None: automatic, leaving `spare` CPUs to the
    processes beside the server, never below 1); `BadParameter` below 1."""
    if workers is None:
        return max(1, cpus.available() - spare)
    if workers < 1:
        raise typer.BadParameter(
            f"{workers} is not a worker count (at least 1)", param_hint="--workers"
        )
    return workers
