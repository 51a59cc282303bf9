"""Service-level objectives of a WorkflowRun (`spec.slo`), what a backend costs
(`PlntBackend.spec.pricing`), and how a window of calls is judged against them (`status.slo`).

An objective is stated the way users feel it, per call: "95% of calls see their first
token within 500 ms". So every latency-like objective is a percentile and a threshold,
and a window of calls *attains* it when at least that share of its calls met the
threshold. That one reading serves every judge: the API server's live `status.slo`
(from the calls it relayed), the canary analysis (from the calls it sent) and
`plnt bench` (beside each percentile it prints). The error budget is the SRE one: an
objective at the 95th percentile allows 5% of calls to miss it; the budget left is the
share of that allowance not yet spent (1: untouched, 0: spent, negative: overspent).

Cost is counted from the prices the run's backend declares: per million input and
output tokens, or per hour of the backend; `maxCostPerMillionTokens` is held against
the window's cost over its tokens.

`judge` is pure (no I/O, no clock): the caller hands it the window's samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from plnt.api.base import WireModel

OBJECTIVE_NAMES = (
    "timeToFirstToken",
    "timePerOutputToken",
    "latency",
    "errorRate",
    "tokensPerSecond",
    "costPerMillionTokens",
)
"""The objectives in the order status, CLI and Events name them."""

DEFAULT_WINDOW_SECONDS = 3600


class LatencyObjective(WireModel):
    """At least `percentile`% of calls take at most `milliseconds`."""

    percentile: float = Field(
        default=95.0, gt=0.0, lt=100.0, description="Share of calls (percent) that must meet it."
    )
    milliseconds: float = Field(gt=0.0, le=3_600_000.0, description="The threshold, in ms.")


class TokenRateObjective(WireModel):
    """At least `percentile`% of calls that produce tokens do so at `tokensPerSecond` or more."""

    percentile: float = Field(
        default=95.0, gt=0.0, lt=100.0, description="Share of calls (percent) that must meet it."
    )
    tokens_per_second: float = Field(
        gt=0.0,
        le=1_000_000.0,
        description="Output tokens per second of one call, from its first token to its end.",
    )


class ServiceLevelObjectives(WireModel):
    """What the run's callers need, held by the canary, the bench, placement and alerts."""

    time_to_first_token: LatencyObjective | None = Field(
        default=None,
        description="Time from the call to its first output token (streamed calls).",
    )
    time_per_output_token: LatencyObjective | None = Field(
        default=None,
        description="Mean time between a streamed call's output tokens after the first.",
    )
    latency: LatencyObjective | None = Field(
        default=None, description="End-to-end time of a call, streamed or not."
    )
    max_error_rate: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        description="Largest share of calls that may fail (0..1, exclusive): the error budget.",
    )
    min_tokens_per_second: TokenRateObjective | None = Field(
        default=None, description="Output rate of the calls that produce tokens."
    )
    max_cost_per_million_tokens: float | None = Field(
        default=None,
        gt=0.0,
        description="Largest cost of a million tokens (input and output), in the backend's "
        "currency, from the prices its spec.pricing declares.",
    )
    window_seconds: int = Field(
        default=DEFAULT_WINDOW_SECONDS,
        ge=60,
        le=30 * 86400,
        description="The window live attainment is measured over (seconds).",
    )

    def streamed(self) -> bool:
        """Whether judging needs streamed calls (a token timing is an objective)."""
        return self.time_to_first_token is not None or self.time_per_output_token is not None


OBJECTIVE_FIELDS: tuple[str, ...] = tuple(
    field.alias or name
    for name, field in ServiceLevelObjectives.model_fields.items()
    if name != "window_seconds"
)
"""Each objective's field in `spec.slo` (every field but the window), in `OBJECTIVE_NAMES`
order: what admission requires at least one of."""


class BackendPricing(WireModel):
    """What a backend costs: per million tokens, or per hour (one of the two)."""

    currency: str = Field(
        default="USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code of the prices."
    )
    input_per_million_tokens: float | None = Field(
        default=None, ge=0.0, description="Price of a million input (prompt) tokens."
    )
    output_per_million_tokens: float | None = Field(
        default=None, ge=0.0, description="Price of a million output (completion) tokens."
    )
    per_hour: float | None = Field(
        default=None, ge=0.0, description="Price of an hour of the backend, used or not."
    )

    def per_token(self) -> bool:
        """Whether prices are per token (they win when per hour is declared too)."""
        prices = (self.input_per_million_tokens, self.output_per_million_tokens)
        return any(price is not None for price in prices)


class ObjectiveAttainment(WireModel):
    """One objective over a window: what was measured against what was asked."""

    name: str = Field(description="One of timeToFirstToken, timePerOutputToken, latency, ….")
    objective: float = Field(
        description="The threshold: ms, a ratio (errorRate), tokens/s or a cost."
    )
    percentile: float | None = Field(
        default=None, description="The share of calls (percent) that must meet it."
    )
    measured: float | None = Field(
        default=None,
        description="The window's value at that percentile (ms, tokens/s), its error ratio, "
        "or its cost per million tokens; null without samples.",
    )
    attainment: float | None = Field(
        default=None, description="Share of the window's calls that met the threshold (0..1)."
    )
    met: bool | None = Field(default=None, description="Null when nothing was measured.")
    budget_remaining: float | None = Field(
        default=None,
        description="Share of the error budget not yet spent (1 untouched, ≤0 spent).",
    )
    samples: int = Field(default=0, description="Calls the value was measured on.")

    def summary(self) -> str:
        """`timeToFirstToken p95 612ms > 500ms`, for messages and Events."""
        unit = _UNITS.get(self.name, "")
        at = f" p{_number(self.percentile)}" if self.percentile is not None else ""
        if self.measured is None:
            return f"{self.name}{at}: no samples (objective {_number(self.objective)}{unit})"
        relation = "meets" if self.met else "misses"
        return (
            f"{self.name}{at} {_number(self.measured)}{unit} {relation} "
            f"{_number(self.objective)}{unit}"
        )


_UNITS = {
    "timeToFirstToken": "ms",
    "timePerOutputToken": "ms",
    "latency": "ms",
    "tokensPerSecond": " tokens/s",
}


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.4g}" if abs(value) < 1 else f"{value:.1f}".removesuffix(".0")


class CostSoFar(WireModel):
    """What the window's calls cost, from the backend's declared prices."""

    currency: str
    amount: float = Field(description="Cost over the window.")
    basis: Literal["tokens", "hourly"]
    input_tokens: int = 0
    output_tokens: int = 0
    per_million_tokens: float | None = Field(
        default=None, description="amount over the window's tokens, per million."
    )


class SLOStatus(WireModel):
    """Attainment of `spec.slo` over its window, from live traffic."""

    window_seconds: int
    calls: int = Field(description="Calls in the window.")
    objectives: list[ObjectiveAttainment] = Field(default_factory=list)
    met: bool | None = Field(
        default=None, description="Every objective met (null: nothing measured yet)."
    )
    error_budget_remaining: float | None = Field(
        default=None, description="The smallest budget left among the objectives."
    )
    cost: CostSoFar | None = None
    backend: str | None = Field(default=None, description="Whose prices the cost uses.")
    updated_at: str | None = Field(default=None, description="When this was measured.")


@dataclass
class Samples:
    """A window's calls as the judges see them (ms, tokens/s; errors and tokens counted)."""

    calls: int = 0
    errors: int = 0
    first_token_ms: list[float] = field(default_factory=list)
    per_token_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    tokens_per_second: list[float] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    span_seconds: float = 0.0
    """How long the window's calls spread over (for hourly prices)."""


def percentile_of(values: Sequence[float], percentile: float) -> float | None:
    """The nearest-rank percentile (the value at least `percentile`% of `values` are ≤ to)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(percentile / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _budget(missed: float, allowed: float) -> float:
    return round(1.0 - missed / allowed, 4) if allowed > 0 else (1.0 if missed == 0 else -1.0)


def _share(
    name: str, threshold: float, percentile: float, values: Sequence[float], *, at_least: bool
) -> ObjectiveAttainment:
    """A percentile objective judged on `values`: met when at least `percentile`% of them
    are within `threshold` (at most it; at least it for a rate, `at_least`)."""
    if not values:
        return ObjectiveAttainment(name=name, objective=threshold, percentile=percentile)
    good = sum(1 for v in values if (v >= threshold if at_least else v <= threshold))
    share = good / len(values)
    if at_least:
        # The rate p% of calls reach or beat: the nearest rank counted from the fastest.
        measured = -(percentile_of([-v for v in values], percentile) or 0.0)
    else:
        measured = percentile_of(values, percentile) or 0.0
    return ObjectiveAttainment(
        name=name,
        objective=threshold,
        percentile=percentile,
        measured=round(measured, 3),
        attainment=round(share, 4),
        met=share * 100.0 >= percentile,
        budget_remaining=_budget(1.0 - share, 1.0 - percentile / 100.0),
        samples=len(values),
    )


def cost_of(pricing: BackendPricing, samples: Samples) -> CostSoFar:
    """What `samples` cost at `pricing` (token prices win when both are declared)."""
    tokens = samples.input_tokens + samples.output_tokens
    if pricing.per_token():
        amount = (
            samples.input_tokens * (pricing.input_per_million_tokens or 0.0)
            + samples.output_tokens * (pricing.output_per_million_tokens or 0.0)
        ) / 1e6
        basis: Literal["tokens", "hourly"] = "tokens"
    else:
        amount = (pricing.per_hour or 0.0) * samples.span_seconds / 3600.0
        basis = "hourly"
    return CostSoFar(
        currency=pricing.currency,
        amount=round(amount, 6),
        basis=basis,
        input_tokens=samples.input_tokens,
        output_tokens=samples.output_tokens,
        per_million_tokens=round(amount / tokens * 1e6, 6) if tokens else None,
    )


def judge(
    slo: ServiceLevelObjectives, samples: Samples, *, pricing: BackendPricing | None = None
) -> list[ObjectiveAttainment]:
    """Every objective `slo` states, judged on `samples` (in `OBJECTIVE_NAMES` order).

    An objective with no samples (a TTFT objective over calls that were not streamed, a
    cost objective without prices) is reported with `met: null`: nothing says it was
    missed, and nothing says it was met.
    """
    judged: list[ObjectiveAttainment] = []
    for name, latency, values in (
        ("timeToFirstToken", slo.time_to_first_token, samples.first_token_ms),
        ("timePerOutputToken", slo.time_per_output_token, samples.per_token_ms),
        ("latency", slo.latency, samples.latency_ms),
    ):
        if latency is not None:
            judged.append(
                _share(name, latency.milliseconds, latency.percentile, values, at_least=False)
            )
    if slo.max_error_rate is not None:
        if samples.calls:
            ratio = samples.errors / samples.calls
            judged.append(
                ObjectiveAttainment(
                    name="errorRate",
                    objective=slo.max_error_rate,
                    measured=round(ratio, 4),
                    attainment=round(1.0 - ratio, 4),
                    met=ratio <= slo.max_error_rate,
                    budget_remaining=_budget(ratio, slo.max_error_rate),
                    samples=samples.calls,
                )
            )
        else:
            judged.append(ObjectiveAttainment(name="errorRate", objective=slo.max_error_rate))
    if (rate := slo.min_tokens_per_second) is not None:
        judged.append(
            _share(
                "tokensPerSecond",
                rate.tokens_per_second,
                rate.percentile,
                samples.tokens_per_second,
                at_least=True,
            )
        )
    if slo.max_cost_per_million_tokens is not None:
        limit = slo.max_cost_per_million_tokens
        cost = cost_of(pricing, samples) if pricing is not None else None
        per_million = cost.per_million_tokens if cost is not None else None
        if per_million is None:
            judged.append(ObjectiveAttainment(name="costPerMillionTokens", objective=limit))
        else:
            judged.append(
                ObjectiveAttainment(
                    name="costPerMillionTokens",
                    objective=limit,
                    measured=per_million,
                    met=per_million <= limit,
                    budget_remaining=round(1.0 - per_million / limit, 4),
                    samples=samples.calls,
                )
            )
    return judged


def overall(judged: Sequence[ObjectiveAttainment]) -> tuple[bool | None, float | None]:
    """Whether every measured objective is met (null when none was measured), and the
    smallest budget left."""
    measured = [o for o in judged if o.met is not None]
    budgets = [o.budget_remaining for o in judged if o.budget_remaining is not None]
    met = all(o.met for o in measured) if measured else None
    return met, (min(budgets) if budgets else None)
