"""Recording a call's progress in Temporal the moment it changes, not at the next heartbeat.

The SDK throttles `activity.heartbeat`: it sends at once only when nothing was sent within
the throttle interval (the worker's `max_heartbeat_throttle_interval`, a second), and
otherwise holds the newest details until the interval ends. A worker killed in that time
takes a finished step with it, and the next attempt runs the step again. So each change of
progress (a step, a `forEach` element, a tool-loop turn or call) is also sent as a
heartbeat of its own through the activity's Temporal client (`RecordActivityTaskHeartbeat`,
awaited): once that returns, the server holds it, whatever happens to this worker.

One recording is in flight at a time, and it always sends the newest details: progress
that changes faster than the server answers is coalesced, never queued, so a map of a
thousand quick elements costs about as many round trips as fit in its run, and reading the
runner's stream never waits on them. Where the activity has no client (Temporal's
`ActivityEnvironment` in tests), the SDK's heartbeat alone carries progress, as before.

The cost is one round trip to Temporal per recording, off the call's path; `recorded` and
`seconds` count them for a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity
from temporalio.client import AsyncActivityHandle

from plnt.processes import tasks

log = logging.getLogger("plnt.sagas.invocations")


class Checkpoints:
    """Sends the newest progress as its own heartbeat whenever `mark` says it changed."""

    def __init__(self, details: Callable[[], dict[str, Any]]) -> None:
        self._details = details
        self._changed = asyncio.Event()
        self._handle = _handle()
        self.recorded = 0
        """Recordings the server answered."""
        self.seconds = 0.0
        """Their time, summed: what durability cost this call (off its path)."""

    def mark(self) -> None:
        """Progress changed: hand it to the SDK, and record it at once (in the background)."""
        details = self._details()
        activity.heartbeat(details)
        self._changed.set()

    async def _send(self) -> None:
        assert self._handle is not None
        while True:
            await self._changed.wait()
            self._changed.clear()
            began = time.perf_counter()
            try:
                await self._handle.heartbeat(self._details())
            except Exception as error:  # the SDK's heartbeat still carries the progress
                log.info("recording a call's progress failed: %s", error)
                continue
            self.seconds += time.perf_counter() - began
            self.recorded += 1

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Checkpoints]:
        """Record while the block runs; what is not recorded when it ends is left to the
        SDK's heartbeat (the call ended anyway)."""
        if self._handle is None:
            yield self
            return
        async with tasks.running(self._send(), name="invocation checkpoints"):
            yield self


def _handle() -> AsyncActivityHandle | None:
    """This activity's handle on its own Temporal client, or None without a client."""
    try:
        client = activity.client()
    except RuntimeError:
        return None
    return client.get_async_activity_handle(task_token=activity.info().task_token)
