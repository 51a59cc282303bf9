"""Judging a canary: percentiles and the analysis verdict's messages."""

from __future__ import annotations

import pytest

from plnt.sagas import probing


def samples(*milliseconds: float, failures: int = 0) -> list[probing.Sample]:
    return [probing.Sample(True, ms) for ms in milliseconds] + [
        probing.Sample(False, 1.0) for _ in range(failures)
    ]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert probing.percentile(values, 0.95) == 95.0
    assert probing.percentile(values, 0.5) == 50.0
    assert probing.percentile([7.0], 0.95) == 7.0
    assert probing.percentile([], 0.95) == 0.0


def test_a_slow_canary_fails_with_measured_p95_against_the_limit_and_the_stable() -> None:
    canary = samples(*([100.0] * 18 + [412.0, 500.0]))
    stable = samples(*([120.0] * 20))
    with pytest.raises(probing.AnalysisFailed) as raised:
        probing.judge(canary, stable, max_error_rate=None, max_p95=250)
    assert str(raised.value) == "analysis failed: p95 412 ms > limit 250 ms (stable p95 120 ms)"


def test_an_erroring_canary_fails_naming_the_error_rate() -> None:
    with pytest.raises(probing.AnalysisFailed, match=r"error rate 0\.25 > limit 0\.10"):
        probing.judge(samples(10.0, 10.0, 10.0, failures=1), None, max_error_rate=0.1, max_p95=None)


def test_a_healthy_canary_passes_with_its_measurements() -> None:
    verdict = probing.judge(samples(5.0, 6.0, 7.0), None, max_error_rate=0.0, max_p95=50)
    assert verdict.error_rate == 0.0 and verdict.p95 == 7.0
    assert verdict.message == "analysis passed: 3 requests, error rate 0.00, p95 7 ms"
