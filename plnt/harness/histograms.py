"""Latency histograms: HdrHistogram, so percentiles are accurate without keeping every sample.

Values are recorded in microseconds with three significant digits, from 1 µs to one hour:
any percentile read back is within 0.1 % of the exact one (HdrHistogram's guarantee), a
bench of millions of requests costs a few hundred KiB, and histograms of several
endpoints or phases add up exactly (`merge`). A sorted list of samples would be exact too,
but grows with the run and costs a sort per progress line.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from plnt.harness.result import EMPTY, Percentiles

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour; anything longer is recorded as one hour
SIGNIFICANT_DIGITS = 3


class LatencyHistogram:
    """Latencies in milliseconds in, `Percentiles` out."""

    __slots__ = ("_histogram", "_max_us", "_sum_us")

    def __init__(self) -> None:
        self._histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._max_us = 0
        self._sum_us = 0  # the exact mean, without hdrh's walk over every bucket

    @property
    def count(self) -> int:
        return int(self._histogram.get_total_count())

    def record_ms(self, milliseconds: float) -> None:
        """Record one latency (clamped to 1 µs .. 1 h)."""
        value = min(HIGHEST_US, max(LOWEST_US, round(milliseconds * 1000.0)))
        self._histogram.record_value(value)
        self._sum_us += value
        if value > self._max_us:
            self._max_us = value

    def merge(self, other: LatencyHistogram) -> None:
        """Add every value `other` recorded."""
        self._histogram.add(other._histogram)
        self._max_us = max(self._max_us, other._max_us)
        self._sum_us += other._sum_us

    def percentile_ms(self, percent: float) -> float:
        """The value at `percent` (0..100) in ms; 0 when nothing was recorded."""
        if self.count == 0:
            return 0.0
        return float(self._histogram.get_value_at_percentile(percent)) / 1000.0

    def percentiles(self) -> Percentiles:
        """p50/p90/p95/p99, the exact maximum and the mean, in milliseconds."""
        count = self.count
        if count == 0:
            return EMPTY
        values = self._histogram.get_percentile_to_value_dict([50.0, 90.0, 95.0, 99.0])
        return Percentiles(
            count=count,
            p50_ms=values[50.0] / 1000.0,
            p90_ms=values[90.0] / 1000.0,
            p95_ms=values[95.0] / 1000.0,
            p99_ms=values[99.0] / 1000.0,
            max_ms=self._max_us / 1000.0,
            mean_ms=self._sum_us / count / 1000.0,
        )
