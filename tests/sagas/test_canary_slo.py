"""The canary analysis held to spec.slo (plnt.sagas.gating.slo): each objective judged on
the analysis bench, naming the canary's value, the objective and the stable's."""

from __future__ import annotations

import dataclasses

from plnt.api.slo import ServiceLevelObjectives
from plnt.harness.result import Percentiles
from plnt.sagas.failures import Failure
from plnt.sagas.gating import slo
from plnt.sagas.probing import probes
from tests.support.bench_results import bench


def _streamed(label: str, *, ttft_p95: float, tokens_per_second: float) -> object:
    first = Percentiles(20, ttft_p95 / 2, ttft_p95 * 0.9, ttft_p95, ttft_p95 * 1.5, 900.0, 1.0)
    return dataclasses.replace(
        bench(label, 300.0), time_to_first_token=first, tokens_per_second=tokens_per_second
    )


OBJECTIVES = ServiceLevelObjectives.model_validate(
    {
        "timeToFirstToken": {"percentile": 95, "milliseconds": 500},
        "timePerOutputToken": {"percentile": 95, "milliseconds": 50},
        "maxErrorRate": 0.05,
    }
)


def test_a_canary_within_every_objective_passes_naming_each() -> None:
    canary = _streamed("canary", ttft_p95=120.0, tokens_per_second=40.0)
    stable = _streamed("stable", ttft_p95=110.0, tokens_per_second=42.0)
    checks = slo.judge(OBJECTIVES, canary, stable)  # type: ignore[arg-type]
    assert all(ok for ok, _ in checks) and slo.missed_message(checks) is None
    assert checks[0][1] == "timeToFirstToken p95 120 ms <= objective 500 ms at p95; stable 110 ms"
    assert checks[1][1] == "timePerOutputToken mean 25 ms <= objective 50 ms; stable 24 ms"


def test_a_missed_objective_names_the_canary_the_objective_and_the_stable() -> None:
    canary = _streamed("canary", ttft_p95=612.0, tokens_per_second=10.0)
    stable = _streamed("stable", ttft_p95=420.0, tokens_per_second=40.0)
    message = slo.missed_message(slo.judge(OBJECTIVES, canary, stable))  # type: ignore[arg-type]
    assert message == (
        "SLO missed: timeToFirstToken p95 612 ms > objective 500 ms at p95; stable 420 ms; "
        "timePerOutputToken mean 100 ms > objective 50 ms; stable 25 ms"
    )


def test_token_objectives_on_a_bench_that_did_not_stream_are_missed_as_unmeasured() -> None:
    checks = slo.judge(OBJECTIVES, bench("canary", 100.0), None)
    assert [ok for ok, _ in checks] == [False, False, True]
    assert "timeToFirstToken unmeasured on the canary" in checks[0][1]


def test_an_objective_between_reported_percentiles_is_read_at_the_next_one_up() -> None:
    objectives = ServiceLevelObjectives.model_validate(
        {"latency": {"percentile": 97, "milliseconds": 350}}
    )
    [(ok, text)] = slo.judge(objectives, bench("canary", 300.0), None)
    assert ok and text.startswith("latency p99 300 ms")


def test_an_objective_beyond_p99_is_read_at_the_maximum_as_plnt_bench_reads_it() -> None:
    objectives = ServiceLevelObjectives.model_validate(
        {"latency": {"percentile": 99.9, "milliseconds": 350}}
    )
    result = bench("canary", 300.0)
    assert result.latency is not None
    tail = dataclasses.replace(result.latency, max_ms=900.0)
    slow_tail = dataclasses.replace(result, latency=tail)
    [(ok, text)] = slo.judge(objectives, slow_tail, None)
    assert not ok and text.startswith("latency max 900 ms")


def test_streamed_objectives_make_the_analysis_stream_and_a_miss_has_its_own_reason() -> None:
    assert OBJECTIVES.streamed()
    [endpoint] = probes.analysis_endpoints(["http://r:1"], [], stream=True)
    assert endpoint.invoke_url == "http://r:1/invoke?stream=true"
    assert Failure.SLO_MISSED.value == "SLOMissed"
    assert Failure.SLO_MISSED in Failure  # a condition reason of its own (see failures)
