"""Admission in front of one backend: a concurrency limit, a bounded queue ordered by
criticality, and a time-in-queue limit that is part of the call's deadline.

Why here, in the runner process: the runner is the one process that knows a call will
reach the backend (a step-cache hit never does) and holds the connection to it, so the
limit counts exactly the calls the backend serves. Each replica admits up to the
backend's `capacity.maxConcurrency`, not divided by the replicas, so scaling never
changes (and restarts) a replica (docs/reliability.md).

Policy, per call:

* a free slot and nobody waiting: admitted at once;
* otherwise the call queues, in order of criticality (critical, standard, sheddable), first
  come first served within one; a `sheddable` call queues only while the queue is less
  than half full; a call that finds the queue full takes the place of the newest queued
  call of lower criticality (which is refused) or, when there is none, is refused itself;
* a queued call waits at most `max_wait_seconds` (when set) and never past its
  deadline: the deadline running out in the queue is `DeadlineExceeded` naming the
  queue, the wait limit an `Overloaded` refusal;
* a call whose deadline has already passed is not admitted (`DeadlineExceeded`).

Refusals are immediate (`Overloaded`, answered 503 with `Retry-After`): a caller learns in
milliseconds that there is no room, instead of waiting for an answer that would come too
late. No I/O; time comes from the deadline's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from plnt.api.headers import Criticality
from plnt.runner import deadlines, errors


@dataclass(frozen=True)
class Limits:
    """A backend's admission limits; `max_concurrency` None means no limit at all."""

    max_concurrency: int | None = None
    max_queue: int = 0
    max_wait_seconds: float | None = None
    """The longest a call waits in the queue; None: only its deadline bounds the wait (a
    model that generates for one call at a time takes seconds per call, so a fixed second
    would shed what the caller was willing to wait for)."""

    def retry_after_seconds(self) -> int:
        """What a shed call is told to wait before trying again (`Retry-After`)."""
        return max(1, round(self.max_wait_seconds or 1))


@dataclass(order=True)
class _Waiter:
    rank: int
    seq: int
    future: asyncio.Future[None] = field(compare=False)
    criticality: Criticality = field(compare=False)


@dataclass
class Counts:
    """What the limiter did, by criticality: for metrics, tests and the benchmark."""

    admitted: dict[str, int] = field(default_factory=dict)
    shed: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def bump(table: dict[str, int], criticality: Criticality) -> None:
        table[criticality.value] = table.get(criticality.value, 0) + 1


class Limiter:
    """The gate in front of one backend (see the module docstring)."""

    def __init__(self, backend: str, limits: Limits) -> None:
        self.backend = backend
        self.limits = limits
        self.in_flight = 0
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self.counts = Counts()

    @property
    def queued(self) -> int:
        """Calls waiting for a slot."""
        return len(self._waiting)

    def _refuse(self, criticality: Criticality, why: str) -> errors.Overloaded:
        Counts.bump(self.counts.shed, criticality)
        return errors.Overloaded(
            f"{why} ({self.in_flight} in flight, {len(self._waiting)} queued, "
            f"criticality {criticality.value})",
            backend=self.backend,
            queue="admission queue",
            retry_after_seconds=self.limits.retry_after_seconds(),
        )

    @contextlib.asynccontextmanager
    async def admitted(
        self, criticality: Criticality, deadline: deadlines.Deadline
    ) -> AsyncIterator[None]:
        """Hold one of the backend's slots for the body, after queueing if need be."""
        limit = self.limits.max_concurrency
        if limit is None:
            deadline.check(f"admission to backend {self.backend}")
            yield
            return
        if deadline.expired():
            Counts.bump(self.counts.expired, criticality)
            deadline.check(f"admission to backend {self.backend}")
        if self.in_flight < limit and not self._waiting:
            self.in_flight += 1
        else:
            await self._queue(criticality, deadline)
        Counts.bump(self.counts.admitted, criticality)
        try:
            yield
        finally:
            self._release()

    async def _queue(self, criticality: Criticality, deadline: deadlines.Deadline) -> None:
        size = self.limits.max_queue
        if criticality is Criticality.SHEDDABLE and len(self._waiting) * 2 >= size:
            raise self._refuse(criticality, "the queue is half full: sheddable calls go first")
        if len(self._waiting) >= size:
            victim = max(self._waiting, default=None)
            if victim is None or victim.rank <= criticality.rank:
                raise self._refuse(criticality, f"the queue is full ({size})")
            self._waiting.remove(victim)
            Counts.bump(self.counts.shed, victim.criticality)
            victim.future.set_exception(
                errors.Overloaded(
                    f"a more critical call took its place in the queue ({size})",
                    backend=self.backend,
                    queue="admission queue",
                    retry_after_seconds=self.limits.retry_after_seconds(),
                )
            )
        waiter = _Waiter(
            criticality.rank,
            next(self._seq),
            asyncio.get_running_loop().create_future(),
            criticality,
        )
        self._waiting.append(waiter)
        self._waiting.sort()
        longest = self.limits.max_wait_seconds
        wait = deadline.remaining() if longest is None else deadline.bound(longest)
        try:
            async with asyncio.timeout(wait):
                await waiter.future
        except TimeoutError:
            self._forget(waiter)
            if deadline.expired():
                Counts.bump(self.counts.expired, criticality)
                raise errors.DeadlineExceeded(
                    f"the queue of backend {self.backend}",
                    f"waited {wait or 0.0:.3f}s for a slot",
                ) from None
            raise self._refuse(
                criticality, f"waited {wait or 0.0:.3f}s in the queue, its longest"
            ) from None
        except asyncio.CancelledError:
            # The caller went away: give back a slot handed over meanwhile, or the place.
            self._forget(waiter)
            raise

    def _forget(self, waiter: _Waiter) -> None:
        """Drop a waiter that stopped waiting; a slot it was given meanwhile is passed on."""
        if waiter in self._waiting:
            self._waiting.remove(waiter)
        elif (
            waiter.future.done()
            and not waiter.future.cancelled()
            and waiter.future.exception() is None
        ):
            self._release()

    def _release(self) -> None:
        """Hand the slot to the first waiter (it keeps the count), else free it."""
        while self._waiting:
            waiter = self._waiting.pop(0)
            if not waiter.future.done():
                waiter.future.set_result(None)
                return
        self.in_flight -= 1
