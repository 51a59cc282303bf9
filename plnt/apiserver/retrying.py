"""Retries of an after-write hook's calls: converge once at start-up, then retry what failed.

An after-write hook that calls another service (a run's deploy saga, an Invocation's
workflow) must never fail the write it follows, so what it could not do is left to a
background loop. The loop converges once when it starts (what a restart, or a service
down at the time of the write, left undone), then sleeps until a failure wakes it and
retries with exponential backoff, capped, until a pass goes through. It backs off before
every retry: the call that woke it just failed.

The kind's hooks say what converging and retrying mean, and remember what is pending;
this module names no kind.

Errors: an `errors.APIError` of a pass (the store could not be read) is logged and counts
as a failed pass; a failed convergence is not repeated, since what it found undone is
pending by then. Any other exception ends the loop and is raised by `close`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from plnt.api import errors
from plnt.processes import tasks

log = logging.getLogger("plnt.apiserver.retrying")

RETRY_INITIAL_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0


class RetryLoop:
    """One background loop: `converge` at start, then `retry` while `pending` says so.

    `retry` returns True when the pass left nothing pending; `wake` is called by whatever
    just failed and made something pending.
    """

    def __init__(
        self,
        name: str,
        *,
        converge: Callable[[], Awaitable[None]],
        retry: Callable[[], Awaitable[bool]],
        pending: Callable[[], bool],
        initial_seconds: float = RETRY_INITIAL_SECONDS,
        max_seconds: float = RETRY_MAX_SECONDS,
    ) -> None:
        self.name = name
        self._converge = converge
        self._retry = retry
        self._pending = pending
        self._initial = initial_seconds
        self._max = max_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """Something is pending: retry it after the backoff."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def close(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            await tasks.stop(task)

    async def _run(self) -> None:
        delay = self._initial
        try:
            await self._converge()
        except errors.APIError:
            log.exception("%s: the start-up convergence could not read the store", self.name)
        while True:
            if not self._pending():
                self._wake.clear()
                await self._wake.wait()
                delay = self._initial
            await asyncio.sleep(delay)  # the call that made something pending just failed
            try:
                done = await self._retry()
            except errors.APIError:
                log.exception("%s: the retry could not read the store", self.name)
                done = False
            delay = self._initial if done else min(delay * 2, self._max)
