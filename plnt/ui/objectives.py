"""What the Run page's SLO card shows: each objective of `spec.slo` with its attainment over
the window, the error budget left and the cost so far, from `status.slo`
(`plnt.api.slo`, `docs/slo.md`).

No I/O, no HTML. The card lists the objectives the spec states, in the order status and
CLI name them, each beside the API server's last judgement of it; one the status does not
hold yet (a new run, a server that has relayed no call) is shown with its objective and
nothing measured. A field the objects leave out is None here, said once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plnt.ui import views

SPEC_FIELDS = (
    ("timeToFirstToken", "timeToFirstToken", "Time to first token"),
    ("timePerOutputToken", "timePerOutputToken", "Time per output token"),
    ("latency", "latency", "Latency"),
    ("maxErrorRate", "errorRate", "Error rate"),
    ("minTokensPerSecond", "tokensPerSecond", "Tokens per second"),
    ("maxCostPerMillionTokens", "costPerMillionTokens", "Cost per million tokens"),
)
"""Each objective's field in `spec.slo`, its name in `status.slo.objectives` (and
`plnt.api.slo.OBJECTIVE_NAMES`, whose order this keeps) and its label on the card."""

DEFAULT_PERCENTILE = 95.0
DEFAULT_WINDOW_SECONDS = 3600
"""`plnt.api.slo`'s defaults, for a spec written without them."""


@dataclass(frozen=True, slots=True)
class ObjectiveRow:
    """One objective: what is asked, what the window measured, the budget it has left."""

    name: str
    label: str
    objective: str
    """`p95 ≤ 500 ms`, `≤ 1% of calls fail`, `p90 ≥ 15 tokens/s`, `≤ 2 per M tokens`."""
    measured: str
    attainment: float | None
    """Share of the window's calls that met it (0..1)."""
    met: bool | None
    """None: nothing measured yet."""
    budget_remaining: float | None
    samples: int | None


@dataclass(frozen=True, slots=True)
class CostView:
    amount: float | None
    currency: str
    basis: str
    input_tokens: int | None
    output_tokens: int | None
    per_million_tokens: float | None


@dataclass(frozen=True, slots=True)
class SloView:
    """The SLO card: None on the Run page when the run states no objectives."""

    objectives: tuple[ObjectiveRow, ...]
    window: str
    calls: int | None
    """Calls in the window; None when the status has no judgement yet."""
    met: bool | None
    error_budget_remaining: float | None
    cost: CostView | None
    backend: str
    updated_at: str

    @property
    def no_calls(self) -> bool:
        return not self.calls


def window_text(seconds: int) -> str:
    """`1 h`, `30 min`, `2 d`: a window as it is usually stated."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return views.duration_text(float(seconds))


def _text(value: float | None, unit: str = "") -> str:
    if value is None:
        return ""
    shown = f"{value:.4g}" if abs(value) < 1 else f"{value:.1f}".removesuffix(".0")
    return f"{shown}{unit}"


def _percentile(spec: Mapping[str, Any]) -> float:
    value = views.number(spec.get("percentile"))
    return DEFAULT_PERCENTILE if value is None else value


def objective_text(field: str, spec: Any) -> str:
    """What the spec asks of one objective, as a person reads it."""
    if field in ("timeToFirstToken", "timePerOutputToken", "latency"):
        stated = views.mapping(spec)
        threshold = _text(views.number(stated.get("milliseconds")))
        return f"p{_text(_percentile(stated))} ≤ {threshold} ms"
    if field == "minTokensPerSecond":
        stated = views.mapping(spec)
        rate = _text(views.number(stated.get("tokensPerSecond")))
        return f"p{_text(_percentile(stated))} ≥ {rate} tokens/s"
    if field == "maxErrorRate":
        share = views.number(spec)
        return "" if share is None else f"≤ {_text(share * 100)}% of calls fail"
    return f"≤ {_text(views.number(spec))} per M tokens"


def _measured(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    if name == "errorRate":
        return f"{_text(value * 100)}% failed"
    if name == "tokensPerSecond":
        return _text(value, " tokens/s")
    if name == "costPerMillionTokens":
        return f"{_text(value)} per M tokens"
    return _text(value, " ms")


def objective_row(
    field: str, name: str, label: str, spec: Any, judged: Mapping[str, Any]
) -> ObjectiveRow:
    met = judged.get("met")
    return ObjectiveRow(
        name=name,
        label=label,
        objective=objective_text(field, spec),
        measured=_measured(name, views.number(judged.get("measured"))),
        attainment=views.number(judged.get("attainment")),
        met=met if isinstance(met, bool) else None,
        budget_remaining=views.number(judged.get("budgetRemaining")),
        samples=views.integer(judged.get("samples")),
    )


def cost_view(cost: Any) -> CostView | None:
    if not isinstance(cost, Mapping) or not cost:
        return None
    return CostView(
        amount=views.number(cost.get("amount")),
        currency=str(cost.get("currency") or ""),
        basis=str(cost.get("basis") or ""),
        input_tokens=views.integer(cost.get("inputTokens")),
        output_tokens=views.integer(cost.get("outputTokens")),
        per_million_tokens=views.number(cost.get("perMillionTokens")),
    )


def slo_view(spec: Any, status: Any) -> SloView | None:
    """The card for `spec.slo` and `status.slo`; None when the run states no objectives."""
    spec = views.mapping(spec)
    stated = [(f, n, label) for f, n, label in SPEC_FIELDS if spec.get(f) is not None]
    if not stated:
        return None
    status = views.mapping(status)
    judged = {
        str(o.get("name")): o for o in status.get("objectives") or [] if isinstance(o, Mapping)
    }
    window = (
        views.integer(spec.get("windowSeconds"))
        or views.integer(status.get("windowSeconds"))
        or DEFAULT_WINDOW_SECONDS
    )
    met = status.get("met")
    return SloView(
        objectives=tuple(
            objective_row(f, n, label, spec[f], views.mapping(judged.get(n)))
            for f, n, label in stated
        ),
        window=window_text(window),
        calls=views.integer(status.get("calls")),
        met=met if isinstance(met, bool) else None,
        error_budget_remaining=views.number(status.get("errorBudgetRemaining")),
        cost=cost_view(status.get("cost")),
        backend=str(status.get("backend") or ""),
        updated_at=str(status.get("updatedAt") or ""),
    )
