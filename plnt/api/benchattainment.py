"""A finished bench read against the run's `spec.slo`: attainment beside each percentile.

A bench keeps percentiles (p50, p90, p95, p99, max), not every call, so the share of
calls that met a latency-like objective's threshold is known between two of them: when
p90 is within 150 ms and p95 is not, between 90% and 95% of the calls met it. The verdict
is the canary analysis's (`plnt.sagas.gating.slo`): the objective is read at the smallest
reported percentile at or above its own, never kinder than the objective.

Pydantic-free and pure (the CLI reads the bench and the run as JSON, and loads no
pydantic before it needs to). Errors: none; a field that is missing or not a number is
read as not measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REPORTED: tuple[tuple[float, str], ...] = (
    (50.0, "p50Ms"),
    (90.0, "p90Ms"),
    (95.0, "p95Ms"),
    (99.0, "p99Ms"),
    (100.0, "maxMs"),
)
"""The percentiles a bench reports, with their field in its `Percentiles` JSON."""

PERCENTILE_OBJECTIVES: tuple[tuple[str, str], ...] = (
    ("latency", "latency"),
    ("timeToFirstToken", "timeToFirstToken"),
)
"""The objectives a bench reports percentiles of: (spec.slo field, bench result field)."""


@dataclass(frozen=True, slots=True)
class Objective:
    """A latency-like objective: at least `percentile`% of calls within `milliseconds`."""

    name: str
    result_field: str
    percentile: float
    milliseconds: float


@dataclass(frozen=True, slots=True)
class Attainment:
    """What share of a bench's calls met an objective, as far as its percentiles tell."""

    objective: Objective
    at_least: float
    """Percent of calls known to meet the threshold (the largest percentile within it)."""
    below: float | None
    """Percent the share is under (the smallest percentile beyond it); None: every call met it."""
    met: bool

    def share(self) -> str:
        """`90-95%`, `≥99%`, `<50%` or `100%`."""
        if self.below is None:
            return "100%"
        if self.at_least == 0.0:
            return f"<{self.below:g}%"
        if self.below == 100.0:
            return f"≥{self.at_least:g}%"
        return f"{self.at_least:g}-{self.below:g}%"


def objectives(slo: Any) -> list[Objective]:
    """The latency-like objectives `spec.slo` (as JSON) states, in the order benches print."""
    if not isinstance(slo, Mapping):
        return []
    found: list[Objective] = []
    for name, result_field in PERCENTILE_OBJECTIVES:
        stated = slo.get(name)
        if not isinstance(stated, Mapping) or not _number(stated.get("milliseconds")):
            continue
        percentile = _number(stated.get("percentile")) or 95.0
        found.append(Objective(name, result_field, percentile, float(stated["milliseconds"])))
    return found


def within(value: Any, objective: Objective) -> bool | None:
    """Whether one reported value is within the objective's threshold (None: not measured)."""
    number = _number(value)
    return None if number is None else number <= objective.milliseconds


def attainment(result: Mapping[str, Any], objective: Objective) -> Attainment | None:
    """The share of a bench result's calls within `objective` (None: not measured)."""
    reported = result.get(objective.result_field)
    if not isinstance(reported, Mapping):
        return None
    values = [(p, _number(reported.get(field))) for p, field in REPORTED]
    known = [(p, v) for p, v in values if v is not None]
    if not known:
        return None
    at_least = max((p for p, v in known if v <= objective.milliseconds), default=0.0)
    below = min((p for p, v in known if v > objective.milliseconds), default=None)
    judged = next((v for p, v in known if p >= objective.percentile), known[-1][1])
    return Attainment(objective, at_least, below, judged <= objective.milliseconds)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
