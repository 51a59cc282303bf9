"""How a window of calls is judged against spec.slo (plnt.api.slo.judge): pure."""

from __future__ import annotations

from plnt.api import slo


def _objectives(**fields: object) -> slo.ServiceLevelObjectives:
    return slo.ServiceLevelObjectives.model_validate(fields)


def test_a_latency_objective_is_met_when_its_share_of_calls_meets_the_threshold() -> None:
    objectives = _objectives(timeToFirstToken={"percentile": 90, "milliseconds": 100})
    samples = slo.Samples(calls=10, first_token_ms=[50.0] * 9 + [400.0])
    [ttft] = slo.judge(objectives, samples)
    assert ttft.met is True and ttft.attainment == 0.9
    assert ttft.measured == 50.0  # the 90th percentile by nearest rank
    assert ttft.budget_remaining == 0.0  # the 10% allowance is spent exactly


def test_a_missed_objective_names_measured_value_and_objective() -> None:
    objectives = _objectives(latency={"percentile": 50, "milliseconds": 100})
    [latency] = slo.judge(objectives, slo.Samples(calls=3, latency_ms=[150.0, 200.0, 90.0]))
    assert latency.met is False
    assert latency.budget_remaining is not None and latency.budget_remaining < 0
    assert latency.summary() == "latency p50 150ms misses 100ms"


def test_the_error_budget_is_the_share_of_allowed_failures_left() -> None:
    objectives = _objectives(maxErrorRate=0.1)
    [errors] = slo.judge(objectives, slo.Samples(calls=100, errors=5))
    assert errors.met is True and errors.measured == 0.05 and errors.budget_remaining == 0.5


def test_objectives_without_samples_are_neither_met_nor_missed() -> None:
    objectives = _objectives(timePerOutputToken={"milliseconds": 30}, maxCostPerMillionTokens=1)
    judged = slo.judge(objectives, slo.Samples(calls=4, latency_ms=[1, 2, 3, 4]))
    assert [o.met for o in judged] == [None, None]
    assert slo.overall(judged) == (None, None)


def test_cost_counts_tokens_at_the_declared_prices() -> None:
    pricing = slo.BackendPricing(input_per_million_tokens=1.0, output_per_million_tokens=3.0)
    samples = slo.Samples(calls=2, input_tokens=500_000, output_tokens=500_000)
    [cost] = slo.judge(_objectives(maxCostPerMillionTokens=1.5), samples, pricing=pricing)
    assert cost.measured == 2.0 and cost.met is False
    assert slo.cost_of(pricing, samples).amount == 2.0


def test_hourly_prices_are_charged_over_the_span_of_the_calls() -> None:
    pricing = slo.BackendPricing(per_hour=6.0)
    cost = slo.cost_of(pricing, slo.Samples(calls=1, output_tokens=1000, span_seconds=1800))
    assert cost.basis == "hourly" and cost.amount == 3.0 and cost.per_million_tokens == 3000.0


def test_a_token_rate_is_measured_at_the_slow_end() -> None:
    objectives = _objectives(minTokensPerSecond={"percentile": 80, "tokensPerSecond": 20})
    rates = [5.0, 30.0, 30.0, 30.0, 30.0]
    [rate] = slo.judge(objectives, slo.Samples(calls=5, tokens_per_second=rates))
    assert rate.met is True and rate.measured == 30.0 and rate.attainment == 0.8
