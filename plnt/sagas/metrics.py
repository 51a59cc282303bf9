"""Prometheus metrics of the deploy worker, fed by a worker interceptor.

Workflow code is replayed and must stay deterministic, so nothing here runs in the
workflow: every figure is taken where side effects happen, in the worker's activities.

* `plnt_saga_activity_duration_seconds{activity, outcome}` and
  `plnt_saga_activity_retries_total{activity}`: each activity execution, timed around
  the activity (outcome succeeded, failed or cancelled); an execution whose attempt is
  above 1 is a retry.
* `plnt_saga_step_duration_seconds{step, outcome}` and `plnt_saga_deploys_total{result}`:
  read from what the saga reports. Every step transition and the end of every deploy
  is published through the `report` activity (see `reporting`), so the interceptor sees
  a step turn Running and later Succeeded, Skipped or Failed, and the Event that closes
  a deploy (Promoted, or RolledBack: Warning after a failure, Normal after an abort or
  a newer generation). A step's duration is measured on this worker's clock between
  the two reports; if another worker reported the start (a worker was replaced
  mid-step), the timeline's own start and end times (second precision) are used. Every
  report repeats the whole timeline, so each step's end is counted once.

Under `plnt up` the worker runs in the API server's process and these families are
registered into the server's registry (one /metrics); `plnt worker --metrics-port`
serves them on a port of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from temporalio import activity
from temporalio import worker as temporal_worker

from plnt.sagas import activitynames
from plnt.sagas import values as v

_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

DEPLOY_RESULTS = ("promoted", "rolled_back", "interrupted")
"""`plnt_saga_deploys_total`'s results: the new revision serves; a failure's canary was
removed (the previous revision serves, if any); an abort or a newer generation stopped it."""

ACTIVITIES = activitynames.DEPLOY
"""The saga's activities (`DeployActivities.all`, less the positional forms older sagas
schedule): their retry counters exist from the start, at 0."""

ACTIVITY_OUTCOMES = ("succeeded", "failed", "cancelled")

STEP_OUTCOMES = {"Succeeded": "succeeded", "Skipped": "skipped", "Failed": "failed"}
STEPS = ("pull", "resolve", "install", "smoke", "route", "analyze", "promote")


class SagaMetrics:
    """The worker's metric families, in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.activity_duration = Histogram(
            "plnt_saga_activity_duration_seconds",
            "Duration of one execution of a deploy-saga activity in seconds, by activity "
            "and outcome (succeeded, failed, cancelled).",
            ["activity", "outcome"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.activity_retries = Counter(
            "plnt_saga_activity_retries",
            "Activity executions that were retries (attempt 2 or later), by activity.",
            ["activity"],
            registry=self.registry,
        )
        self.step_duration = Histogram(
            "plnt_saga_step_duration_seconds",
            "Duration of a deploy step (pull, resolve, install, smoke, analyze, promote) in "
            "seconds, from Running to its end, by step and outcome (succeeded, skipped, "
            "failed); retries of the step are inside it.",
            ["step", "outcome"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.checkpoint_calls = Counter(
            "plnt_invocation_checkpoint_calls",
            "Invocation calls (activity attempts) that ended, whose progress was recorded "
            "as it changed.",
            registry=self.registry,
        )
        self.checkpoints = Counter(
            "plnt_invocation_checkpoints",
            "Immediate recordings of an Invocation call's progress (a step, element, turn "
            "or tool call ended) that Temporal answered.",
            registry=self.registry,
        )
        self.checkpoint_seconds = Counter(
            "plnt_invocation_checkpoint_seconds",
            "Time those recordings took, summed (off the call's path): what durability "
            "from the moment a step ends costs.",
            registry=self.registry,
        )
        self.deploys = Counter(
            "plnt_saga_deploys",
            "Deploys that ended, by result (promoted, rolled_back, interrupted).",
            ["result"],
            registry=self.registry,
        )
        for result in DEPLOY_RESULTS:  # known label values exist from the start, at 0
            self.deploys.labels(result)
        for name in ACTIVITIES:
            self.activity_retries.labels(name)
            # Every known series from the start, at 0: a series first scraped with its
            # final count has no increase, so a deploy faster than a scrape interval
            # would leave rate() and the dashboard's quantiles empty.
            for outcome in ACTIVITY_OUTCOMES:
                self.activity_duration.labels(name, outcome)
        for step in STEPS:
            for outcome in STEP_OUTCOMES.values():
                self.step_duration.labels(step, outcome)
        self._running: dict[tuple[str, str], tuple[str | None, float]] = {}
        self._ended: dict[tuple[str, str], tuple[Any, Any]] = {}

    def observe_checkpoints(self, recorded: int, seconds: float) -> None:
        """One Invocation call's immediate recordings (`invoking.checkpointing`)."""
        self.checkpoint_calls.inc()
        self.checkpoints.inc(recorded)
        self.checkpoint_seconds.inc(seconds)

    # -- what the reports say -----------------------------------------------------------

    def observe_report(self, report: v.Report) -> None:
        """Step transitions and deploy ends in one `report` the saga published."""
        uid = report.run.uid
        saga = report.status.get("saga")
        for step in saga if isinstance(saga, list) else []:
            if isinstance(step, Mapping):
                self._observe_step(uid, step)
        if report.event_reason == "Promoted":
            self.deploys.labels("promoted").inc()
        elif report.event_reason == "RolledBack":
            result = "rolled_back" if report.event_type == "Warning" else "interrupted"
            self.deploys.labels(result).inc()

    def _observe_step(self, uid: str, step: Mapping[str, Any]) -> None:
        name, state = str(step.get("name", "")), step.get("state")
        key = (uid, name)
        started = step.get("startTime")
        if state == "Running":
            known = self._running.get(key)
            if known is None or known[0] != started:  # a new start (or a new attempt)
                self._running[key] = (started if isinstance(started, str) else None, _now())
            return
        outcome = STEP_OUTCOMES.get(str(state))
        if outcome is None:
            return
        # Every report repeats the whole timeline: an end is counted once.
        end = (started, step.get("endTime"))
        if self._ended.get(key) == end:
            return
        self._ended[key] = end
        while len(self._ended) > _ENDED_KEPT:
            del self._ended[next(iter(self._ended))]
        known = self._running.pop(key, None)
        if known is not None:
            self.step_duration.labels(name, outcome).observe(_now() - known[1])
            return
        # The start was reported elsewhere (a replaced worker): the timeline's own times,
        # if the step ran at all and ended just now (not a step of an older deploy that
        # this worker sees for the first time).
        seconds = _between(started, end[1])
        if seconds is not None and step.get("attempts") and _recent(end[1]):
            self.step_duration.labels(name, outcome).observe(seconds)


_ENDED_KEPT = 10_000
"""Step ends remembered (run, step) to count each once; the oldest are forgotten first."""
_RECENT_SECONDS = 60.0


def _now() -> float:
    return time.monotonic()


def _recent(end: Any) -> bool:
    """Whether a timeline time is within the last minute of this machine's clock."""
    if not isinstance(end, str):
        return False
    try:
        moment = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return False
    return abs((datetime.now(UTC) - moment).total_seconds()) <= _RECENT_SECONDS


def _between(start: Any, end: Any) -> float | None:
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    try:
        began = datetime.fromisoformat(start.replace("Z", "+00:00"))
        ended = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (ended - began).total_seconds())


class Observing(temporal_worker.Interceptor):
    """Times every activity and reads every report for `SagaMetrics`."""

    def __init__(self, metrics: SagaMetrics) -> None:
        self._metrics = metrics

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return _ObservedActivity(next, self._metrics)


class _ObservedActivity(temporal_worker.ActivityInboundInterceptor):
    def __init__(
        self, next: temporal_worker.ActivityInboundInterceptor, metrics: SagaMetrics
    ) -> None:
        super().__init__(next)
        self._metrics = metrics

    async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        name = info.activity_type
        if info.attempt > 1:
            self._metrics.activity_retries.labels(name).inc()
        began = time.perf_counter()
        outcome = "failed"
        try:
            result = await super().execute_activity(input)
            outcome = "succeeded"
        except BaseException as error:
            if activity.is_cancelled() or isinstance(error, asyncio.CancelledError):
                outcome = "cancelled"
            raise
        finally:
            seconds = time.perf_counter() - began
            self._metrics.activity_duration.labels(name, outcome).observe(seconds)
        if name == activitynames.REPORT and input.args and isinstance(input.args[0], v.Report):
            self._metrics.observe_report(input.args[0])
        return result


@contextlib.asynccontextmanager
async def serving(metrics: SagaMetrics, *, host: str, port: int) -> AsyncIterator[int]:
    """Serve `GET /metrics` of `metrics` on `host:port` (0: a free port) while the block
    runs; yields the bound port. For `plnt worker`, which has no API server to join."""

    async def handle(request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()
