"""Bench results made by hand, for tests of what judges them (the canary's verdict, its SLO).

`bench(label, p95, …)` is a `plnt.harness.BenchResult` whose latency percentiles sit at
`p95` (p50 half of it), with `errors` 5xx among `requests`.
"""

from __future__ import annotations

from plnt.harness import BenchResult, Percentiles


def bench(
    label: str,
    p95: float,
    *,
    requests: int = 20,
    errors: int = 0,
    cache: float | None = None,
    rate: float | None = None,
) -> BenchResult:
    latency = Percentiles(requests - errors, p95 / 2, p95, p95, p95, p95, p95 / 2)
    return BenchResult(
        label=label,
        requested_rate=rate,
        achieved_rate=rate or 10.0,
        requests=requests,
        duration_seconds=2.0,
        latency=latency,
        errors={"4xx": 0, "5xx": errors, "timeout": 0, "connection": 0},
        error_rate=errors / requests,
        steps={},
        hops={},
        cache_hit_rate=cache,
        cache_reason=None if cache is not None else "no step consulted the cache",
        time_to_first_token=None,
        tokens_per_second=None,
        gpu_utilization=None,
        gpu_reason="no backend metrics URL",
        generator_cpu_seconds=0.1,
        generator_cpu_ratio=0.05,
    )
