"""The guarded backend: every model call passes admission, the circuit breaker and the
deadline before it reaches the backend, and a fallback backend serves what the primary
cannot.

One `GuardedBackend` wraps the runner's backend (it is itself a `backends.Backend`, so the
executor and the tool loop call it as they called the backend); `guard` builds it, the one
place the backend, its spill backends and its fallback are put together. Per call:

1. the call's deadline (`plnt.runner.deadlines`) has passed → `DeadlineExceeded`, nothing sent;
2. the breaker is open → the fallback serves it, or `Overloaded` at once;
3. admission (`plnt.runner.admission`): a slot, after a bounded wait in the queue ordered by
   criticality; refused → the fallback serves it, or `Overloaded` at once;
4. the call, bounded by the time left: the deadline running out during it is
   `DeadlineExceeded` naming the backend call, and leaving it closes the connection, which
   stops the generation; its outcome feeds the breaker.

Retries are not made here: the executor's step attempts are the one layer that retries a
backend call, and each retry spends from this backend's `RetryBudget` (`may_retry`), so
retries stay a bounded share of the traffic. The fallback has a guard of its own (its own
limits and breaker) and no fallback behind it. A reply the fallback produced says so
(`Reply.served_by`), and the answer carries `X-Plnt-Fallback`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime

import aiohttp

from plnt.api import breakers as api_breakers
from plnt.runner import (
    admission,
    backends,
    breakers,
    deadlines,
    errors,
    metrics,
    retrybudget,
    spilling,
)
from plnt.runner import settings as runner_settings

_STATE_VALUES = {breakers.State.CLOSED: 0, breakers.State.HALF_OPEN: 1, breakers.State.OPEN: 2}


class GuardedBackend:
    """A backend behind admission, a breaker, a deadline and a retry budget."""

    def __init__(
        self,
        backend: backends.Backend,
        *,
        name: str,
        limits: admission.Limits,
        breaker: breakers.Breaker,
        budget: retrybudget.RetryBudget,
        metrics: metrics.RunnerMetrics,
        fallback: GuardedBackend | None = None,
    ) -> None:
        self.name = name
        self.backend = backend
        self.limiter = admission.Limiter(name, limits)
        self.breaker = breaker
        self.budget = budget
        self.fallback = fallback
        self._metrics = metrics
        self._metrics.breaker_state.labels(name).set(0)
        self._metrics.backend_queue.labels(name).set_function(lambda: self.limiter.queued)

    async def chat(
        self, request: backends.ChatRequest, *, on_delta: backends.DeltaListener | None = None
    ) -> backends.Reply:
        """The backend's chat reply, guarded (see the module docstring)."""
        return await self._guarded(lambda backend: backend.chat(request, on_delta=on_delta))

    async def complete(
        self,
        request: backends.CompletionRequest,
        *,
        on_delta: backends.DeltaListener | None = None,
    ) -> backends.Reply:
        """The backend's completion, guarded (see the module docstring)."""
        return await self._guarded(lambda backend: backend.complete(request, on_delta=on_delta))

    def may_retry(self) -> bool:
        """Whether the retry budget has room for one more retry (spent when True)."""
        allowed = self.budget.try_retry()
        self._metrics.retries.labels(self.name, "sent" if allowed else "refused").inc()
        return allowed

    async def _guarded(
        self, send: Callable[[backends.Backend], Awaitable[backends.Reply]]
    ) -> backends.Reply:
        context = deadlines.current()
        if context.deadline.expired():
            self._shed(context, "deadline")
            context.deadline.check(f"the call to backend {self.name}")
        if not self.breaker.allows():
            self._shed(context, "breaker_open")
            refusal = errors.Overloaded(
                "its circuit breaker is open: the backend failed repeatedly",
                backend=self.name,
                queue="circuit breaker",
                retry_after_seconds=max(1, round(self.breaker.policy.open_seconds)),
            )
            return await self._fall_back(send, refusal)
        sent = False
        try:
            async with self.limiter.admitted(context.criticality, context.deadline):
                sent = True
                return await self._send(send, context.deadline)
        except errors.Overloaded as refusal:
            if sent or refusal.backend != self.name:
                raise  # not a refusal of this backend's admission
            self._shed(context, "queue")
            self.breaker.released()
            return await self._fall_back(send, refusal)
        except errors.DeadlineExceeded:
            if not sent:
                self.breaker.released()
                self._shed(context, "deadline")
            raise

    async def _send(
        self,
        send: Callable[[backends.Backend], Awaitable[backends.Reply]],
        deadline: deadlines.Deadline,
    ) -> backends.Reply:
        """One call to the backend, bounded by the time left, its outcome told the breaker."""
        self.budget.called()
        self._metrics.backend_calls.labels(self.name).inc()
        began = time.monotonic()
        left = deadline.remaining()
        try:
            async with asyncio.timeout(left):
                reply = await send(self.backend)
        except TimeoutError as error:
            self.breaker.released()
            raise errors.DeadlineExceeded(
                f"the call to backend {self.name}",
                f"no answer within the {left:.3f}s the call had left",
            ) from error
        except backends.BackendError as error:
            self.breaker.failed(str(error))
            self._report()
            raise
        except BaseException:
            self.breaker.released()
            raise
        self.breaker.succeeded(time.monotonic() - began)
        self._report()
        return reply

    async def _fall_back(
        self,
        send: Callable[[backends.Backend], Awaitable[backends.Reply]],
        refusal: errors.Overloaded,
    ) -> backends.Reply:
        """The fallback's reply, marked; without a fallback the refusal stands."""
        self._report()
        if self.fallback is None:
            raise refusal
        reply = await self.fallback._guarded(send)
        self._metrics.fallback_calls.labels(self.name, self.fallback.name).inc()
        return replace(reply, served_by=self.fallback.name)

    def breaker_states(self) -> list[api_breakers.BreakerState]:
        """This backend's breaker and its fallback's, as `GET /breakers` reports them."""
        breaker = self.breaker
        # Reading the state may move an open breaker past its time to half-open; reporting
        # must not, so the state is read as it stands.
        last = breaker.changes[-1].reason if breaker.changes else None
        own = api_breakers.BreakerState(
            backend=self.name,
            state=breaker.state.value,
            since=datetime.fromtimestamp(breaker.since, UTC).isoformat().replace("+00:00", "Z"),
            reason=last,
        )
        spare = self.fallback.breaker_states() if self.fallback is not None else []
        return [own, *spare]

    def _shed(self, context: deadlines.CallContext, reason: str) -> None:
        self._metrics.shed.labels(self.name, context.criticality.value, reason).inc()

    def _report(self) -> None:
        self._metrics.breaker_state.labels(self.name).set(_STATE_VALUES[self.breaker.state])


QUEUE_PER_SLOT = 8
"""Queued calls allowed per slot when the config sets no `maxQueue`: a canary analysis sends
four calls at once to a model that serves one, and a bounded queue sheds only past that."""


def guard(
    config: runner_settings.BackendConfig,
    *,
    session: aiohttp.ClientSession,
    metrics: metrics.RunnerMetrics,
) -> GuardedBackend:
    """The runner's backend as every call reaches it: the configured one (able to spill,
    `plnt.runner.spilling`) behind the limits `config` names, and its fallback, when it
    names one, behind limits of its own."""
    primary = spilling.backend_of(config, session=session)
    fallback = None
    if config.fallback is not None:
        spare = backends.make_backend(config.fallback, session=session)
        fallback = _guarded(spare, config.fallback, metrics=metrics)
    return _guarded(primary, config, metrics=metrics, fallback=fallback)


def _guarded(
    backend: backends.Backend,
    config: runner_settings.BackendConfig,
    *,
    metrics: metrics.RunnerMetrics,
    fallback: GuardedBackend | None = None,
) -> GuardedBackend:
    """`backend` behind the limits `config` names (and `fallback`, already guarded)."""
    limit = config.max_concurrency
    queue = config.max_queue if config.max_queue is not None else QUEUE_PER_SLOT * (limit or 0)
    return GuardedBackend(
        backend,
        name=config.display_name(),
        limits=admission.Limits(limit, queue, config.max_queue_seconds),
        breaker=breakers.Breaker(
            breakers.BreakerPolicy(
                failure_threshold=config.breaker_failures,
                latency_limit_seconds=config.breaker_latency_seconds,
                open_seconds=config.breaker_open_seconds,
            )
        ),
        budget=retrybudget.RetryBudget(
            retrybudget.BudgetPolicy(
                ratio=config.retry_budget_ratio, floor=config.retry_budget_floor
            )
        ),
        metrics=metrics,
        fallback=fallback,
    )
