"""HdrHistogram percentiles against exact ones on known data."""

from __future__ import annotations

import math
import random

import pytest

from plnt.harness.histograms import LatencyHistogram


def exact(values: list[float], percent: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100.0 * len(ordered))) - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_are_within_a_tenth_of_a_percent_of_the_exact_ones(seed: int) -> None:
    generator = random.Random(seed)
    # A long-tailed mix: most requests near 2 ms, some near 40 ms, a few near 1.5 s.
    values = [
        generator.lognormvariate(math.log(2.0), 0.3)
        if generator.random() < 0.9
        else generator.lognormvariate(math.log(40.0), 0.5)
        for _ in range(20_000)
    ] + [generator.uniform(1_000.0, 2_000.0) for _ in range(50)]
    histogram = LatencyHistogram()
    for value in values:
        histogram.record_ms(value)
    found = histogram.percentiles()
    assert found.count == len(values)
    for percent, measured in (
        (50, found.p50_ms),
        (90, found.p90_ms),
        (95, found.p95_ms),
        (99, found.p99_ms),
    ):
        truth = exact(values, percent)
        # three significant digits, and recording rounds to whole microseconds
        assert abs(measured - truth) <= truth * 0.001 + 0.001, (percent, measured, truth)
    assert found.max_ms == pytest.approx(max(values), abs=0.001)
    assert found.mean_ms == pytest.approx(sum(values) / len(values), rel=1e-4)


def test_an_empty_histogram_reports_zeros_and_merging_adds_counts_exactly() -> None:
    empty = LatencyHistogram()
    assert empty.percentiles().count == 0 and empty.percentile_ms(99) == 0.0
    low, high = LatencyHistogram(), LatencyHistogram()
    for _ in range(99):
        low.record_ms(1.0)
    high.record_ms(500.0)
    low.merge(high)
    merged = low.percentiles()
    assert merged.count == 100
    assert merged.p99_ms == pytest.approx(1.0, rel=0.001)
    assert merged.max_ms == 500.0
    assert merged.mean_ms == pytest.approx((99 * 1.0 + 500.0) / 100)


def test_values_outside_the_range_are_clamped_not_lost() -> None:
    histogram = LatencyHistogram()
    histogram.record_ms(0.0)
    histogram.record_ms(10 * 3_600_000.0)  # ten hours
    found = histogram.percentiles()
    assert found.count == 2
    assert found.max_ms == 3_600_000.0
