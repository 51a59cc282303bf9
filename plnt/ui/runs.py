"""What the Run page shows of a WorkflowRun: its summary line, conditions, timeline,
history and traffic, its quality gate and its SLO card, computed from the object as the
API answered it and the current time.

No I/O, no HTML. The page's fragments read a `RunView` and nothing of the object itself,
so a field the object leaves out (its status on a new run, a condition's reason, a
timestamp) is decided here once: None, "" or an empty tuple.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plnt.ui import evaluations, objectives, views


@dataclass(frozen=True, slots=True)
class RunSummary:
    """The line under the run's name: phase, generations, revision, replicas, backend."""

    name: str
    phase: str
    generation: int | None
    observed_generation: int | None
    revision: int | None
    ready: int
    wanted: int
    backend: str


@dataclass(frozen=True, slots=True)
class ConditionRow:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything the Run page's fragments that follow the WorkflowRun show."""

    summary: RunSummary
    conditions: tuple[ConditionRow, ...]
    timeline: views.Timeline
    history: tuple[views.HistoryRow, ...]
    traffic: tuple[views.TrafficBar, ...]
    evaluation: evaluations.EvaluationView | None
    slo: objectives.SloView | None
    """None when the run states no objectives (`spec.slo`)."""


def summary(run: Mapping[str, Any]) -> RunSummary:
    meta = views.mapping(run.get("metadata"))
    spec = views.mapping(run.get("spec"))
    status = views.mapping(run.get("status"))
    wanted = views.integer(spec.get("replicas"))
    backend = status.get("backend") or views.mapping(spec.get("backend")).get("name")
    return RunSummary(
        name=str(meta.get("name") or ""),
        phase=str(status.get("phase") or "Pending"),
        generation=views.integer(meta.get("generation")),
        observed_generation=views.integer(status.get("observedGeneration")),
        revision=views.integer(status.get("revision")),
        ready=views.integer(status.get("readyReplicas")) or 0,
        wanted=1 if wanted is None else wanted,  # the spec's default
        backend=str(backend or "—"),
    )


def condition_rows(status: Mapping[str, Any]) -> tuple[ConditionRow, ...]:
    return tuple(
        ConditionRow(
            type=str(c.get("type") or ""),
            status=str(c.get("status") or "Unknown"),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
        )
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    )


def run_view(run: Mapping[str, Any], now: datetime) -> RunView:
    status = views.mapping(run.get("status"))
    return RunView(
        summary=summary(run),
        conditions=condition_rows(status),
        timeline=views.timeline(status.get("saga"), now),
        history=tuple(views.history(status)),
        traffic=tuple(views.traffic_bars(status.get("traffic"))),
        evaluation=evaluations.evaluation_view(status.get("lastEvaluation")),
        slo=objectives.slo_view(views.mapping(run.get("spec")).get("slo"), status.get("slo")),
    )
