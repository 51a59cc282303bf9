"""`--workers N` of `plnt up` and `plnt serve`: how many API server processes share the port.

Unset, it is the CPUs this process may use (`plnt.processes.cpus`: affinity, a cgroup
quota, at most 8): one event loop per core. `plnt up` leaves one of them to what runs
beside its API server on the same machine (etcd, Temporal, the deploy worker, runners):
on 2 cores shared with them, a second API process measured no faster for GET, CREATE or
proxied calls and slower for watch fan-out, since every process's watch cache decodes
every event (docs/benchmarks.md). `1` is a single process.
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


def resolve(api_processes: int | None, *, spare: int = 0) -> int:
    """The API process count for `--workers` (None: automatic, leaving `spare` CPUs to
    the processes beside the server, never below 1); `BadParameter` below 1."""
    if api_processes is None:
        return max(1, cpus.available() - spare)
    if api_processes < 1:
        raise typer.BadParameter(  # the words users have read since `--workers` came
            f"{api_processes} is not a worker count (at least 1)", param_hint="--workers"
        )
    return api_processes
