"""Reclaiming a state directory from an earlier run: stop the children it left running.

Why: a child that outlived its `plnt up` (one killed before its children's parent-death
signal could matter, a child that ignored the signal or is slow to act on it) keeps what
the next start needs: etcd its data directory's lock (the next etcd then waits for it
until "etcd not healthy within 20 s", naming neither cause nor culprit), Temporal its
database, a model server its port. Each child writes a record beside its log while it
runs (`plnt.processes.leftovers`); before anything starts, `stop_leftovers` reads those
in the state directory and stops each child still running whose `plnt up` is gone
(SIGTERM, SIGKILL after a deadline), with one warning line naming it:

    stopped etcd (pid 4242) left by an earlier run of /home/me/.local/state/plnt

A child whose `plnt up` still runs means the directory is in use: the start fails with one
line (`InUse`) and nothing is stopped. The runners' fork server is the exception: a `plnt
worker` sharing the directory may own it, so a live owner leaves it alone. Runner processes
are not children in this sense: they outlive `plnt up` on purpose and are adopted. A
process no record names (one started by a plnt older than the records) is not found here:
it is stopped by hand.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from plnt.processes import leftovers

log = logging.getLogger("plnt.standalone")

EXCLUSIVE_RECORDS = ("*.pid", "models/*.pid")
"""Records (globs under the state directory) of children one `plnt up` runs: etcd
(`etcd.pid`), Temporal (`temporal.pid`), model servers (`models/NAME.pid`)."""
SHARED_RECORDS = ("runners/*.pid",)
"""Records of children a `plnt worker` sharing the directory may own: the fork server."""


class InUse(Exception):
    """The state directory's children belong to a `plnt up` that still runs."""


async def stop_leftovers(state: Path) -> list[leftovers.Leftover]:
    """Stop what an earlier run of `state` left running, one warning line each; what was
    stopped. `InUse` (nothing stopped) when their owner still runs."""

    def stop_all() -> list[leftovers.Leftover]:
        exclusive = sorted(path for glob in EXCLUSIVE_RECORDS for path in state.glob(glob))
        shared = sorted(path for glob in SHARED_RECORDS for path in state.glob(glob))
        return [*leftovers.stop_left(exclusive), *leftovers.stop_left(shared, shared=True)]

    try:
        stopped = await asyncio.to_thread(stop_all)
    except leftovers.InUse as error:
        raise InUse(
            f"{state} is in use: its {error.what} (pid {error.pid}) belongs to process "
            f"{error.owner}, which still runs"
        ) from error
    for leftover in stopped:
        log.warning(
            "stopped %s (pid %d) left by an earlier run of %s", leftover.what, leftover.pid, state
        )
    return stopped
