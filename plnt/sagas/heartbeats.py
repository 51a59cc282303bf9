"""Heartbeats that keep coming while an activity waits on work that reports nothing.

An activity with a heartbeat timeout is counted lost when no heartbeat arrives in time,
and Temporal retries it elsewhere. A step that heartbeats only when its work reports
progress (the install step, between polls of a Deployment) goes silent while one call
takes long: a Helm install on a busy cluster, an API server that answers slowly. That
is slowness, not a lost worker; retrying it only starts the same install again. So the
install and scale activities heartbeat every second from a background task while the
target works, repeating the last details the target gave (so a retry still sees them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity

from plnt.processes import tasks

EVERY_SECONDS = 1.0
"""Well under the shortest heartbeat timeout a step sets (5 s); the SDK throttles what it
sends to the server, so a short period costs nothing."""


@contextlib.asynccontextmanager
async def steady(every: float = EVERY_SECONDS) -> AsyncIterator[Callable[..., None]]:
    """Heartbeat every `every` seconds while the block runs; yields the heartbeat to hand
    the work, whose details are repeated until it gives new ones."""
    last: tuple[Any, ...] = ()

    def beat(*details: Any) -> None:
        nonlocal last
        last = details
        activity.heartbeat(*details)

    async def ticking() -> None:
        while True:
            await asyncio.sleep(every)  # the period between heartbeats
            activity.heartbeat(*last)

    async with tasks.running(ticking(), name="activity heartbeat"):
        yield beat
