"""Invocation metrics: how many Invocations are in each phase, and how long finished ones took.

* `plnt_invocations{phase}` (gauge): Invocations stored now, by phase. Like the bench
  gauges, it follows the Invocations on the server's own store (`plnt.apiserver.following`),
  so every replica exports the same values (aggregate with `max`).
* `plnt_invocations_finished_total{phase}` (counter) and
  `plnt_invocation_duration_seconds{phase}` (histogram, from `status.startTime` — or the
  creation when it never started — to `status.completionTime`): counted by the after-write
  hook of the replica that stored the write which finished the Invocation, so across
  replicas each finish counts once (aggregate with `sum`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import Counter as CounterMetric
from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from plnt.api.invocations import FINISHED_PHASES
from plnt.api.meta import parse_time
from plnt.apiserver import following
from plnt.registry import invocations
from plnt.registry.changes import Change
from plnt.registry.objects import Object, lookup
from plnt.registry.options import AgentWarning

DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


def _phase(obj: Mapping[str, Any] | None) -> str:
    status = (obj or {}).get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return str(phase or "Pending")


def seconds_taken(obj: Object) -> float | None:
    """From the start (or the creation) to the completion, when both are known."""
    began = lookup(obj, "status", "startTime") or lookup(obj, "metadata", "creationTimestamp")
    ended = lookup(obj, "status", "completionTime")
    if not isinstance(began, str) or not isinstance(ended, str):
        return None
    try:
        return max(0.0, (parse_time(ended) - parse_time(began)).total_seconds())
    except ValueError:
        return None


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace", "")), str(metadata.get("name", ""))


class PhaseGauge(following.Gauges):
    """Invocations by phase, from the ones the server follows."""

    def __init__(self) -> None:
        self._phases: dict[tuple[str, str], str] = {}

    def update(self, obj: Mapping[str, Any]) -> None:
        self._phases[_key(obj)] = _phase(obj)

    def forget(self, obj: Mapping[str, Any]) -> None:
        self._phases.pop(_key(obj), None)

    def clear(self) -> None:
        self._phases.clear()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "plnt_invocations", "Invocations stored now, by phase.", labels=["phase"]
        )
        counts = Counter(self._phases.values())
        for phase in ("Pending", "Running", *FINISHED_PHASES):
            family.add_metric([phase], counts.get(phase, 0))
        yield family


class FinishMeter:
    """The after-write hook counting Invocations as they finish (module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.finished = CounterMetric(
            "plnt_invocations_finished",
            "Invocations that finished, by phase (Succeeded, Failed, Cancelled).",
            ["phase"],
            registry=registry,
        )
        self.duration = Histogram(
            "plnt_invocation_duration_seconds",
            "Time from an Invocation's start to its completion, by the phase it ended in.",
            ["phase"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        for phase in FINISHED_PHASES:  # known values exist from the start, at 0
            self.finished.labels(phase)
            self.duration.labels(phase)

    async def after_write(self, change: Change) -> list[AgentWarning]:
        phase = _phase(change.after)
        if change.gone or phase not in FINISHED_PHASES or _phase(change.before) == phase:
            return []
        self.finished.labels(phase).inc()
        if (seconds := seconds_taken(change.after)) is not None:
            self.duration.labels(phase).observe(seconds)
        return []


async def context(app: web.Application) -> AsyncIterator[None]:
    """An aiohttp cleanup context (after storage): follow Invocations while serving."""
    prefix = invocations.DEFINITION.key_prefix()
    async with following.exported(app, PhaseGauge(), prefix=prefix, name="invocation gauge"):
        yield
