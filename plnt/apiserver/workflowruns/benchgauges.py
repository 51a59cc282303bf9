"""Gauges of the last bench of every WorkflowRun (`plnt_bench_*`), from `status.lastBench`.

A bench runs as a saga and writes its result into the run's status, wherever it ran; the
API server is the one place every such write passes, and it already holds every run in
its watch cache. So the server follows WorkflowRuns on its own store
(`plnt.apiserver.following`) and keeps each run's last results, and the `BenchGauges`
collector turns them into gauges when /metrics is scraped. Every replica of the server
exports the same values: dashboards aggregate them with `max`.

`status.lastBench` holds one result in the harness's JSON form (`BenchResult.to_json`,
camelCase), or a compare run's results as `{"results": [...]}`; each result's `label`
(stable, canary or a revision number) becomes the `revision` label. Values the bench
could not measure (null cache hit rate, GPU utilisation, time to first token) are left
out, never exported as 0. Ratios are exported 0..1: the harness's `gpuUtilization` is
DCGM's percent, so it is divided by 100.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric

from plnt.api.runs import RunKey
from plnt.apiserver import following
from plnt.registry import workflowruns

_QUANTILES = (("0.5", "p50Ms"), ("0.9", "p90Ms"), ("0.95", "p95Ms"), ("0.99", "p99Ms"))
_MAX = ("1", "maxMs")
_LABELS = ["namespace", "workflowrun", "revision"]


def results_of(last_bench: Any) -> list[Mapping[str, Any]]:
    """The harness results in a `status.lastBench` value (none when it holds none)."""
    if not isinstance(last_bench, Mapping):
        return []
    if isinstance(last_bench.get("results"), list):
        return [r for r in last_bench["results"] if isinstance(r, Mapping) and "latency" in r]
    return [last_bench] if isinstance(last_bench.get("latency"), Mapping) else []


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class BenchGauges(following.Gauges):
    """The last bench results per run, exported as gauges when scraped."""

    def __init__(self) -> None:
        self._runs: dict[RunKey, list[Mapping[str, Any]]] = {}

    def update(self, obj: Mapping[str, Any]) -> None:
        """Take a WorkflowRun's current `status.lastBench` (or forget a run without one)."""
        key = RunKey.of(obj)
        status = obj.get("status") or {}
        results = results_of(status.get("lastBench") if isinstance(status, Mapping) else None)
        if results:
            self._runs[key] = results
        else:
            self._runs.pop(key, None)

    def forget(self, obj: Mapping[str, Any]) -> None:
        self._runs.pop(RunKey.of(obj), None)

    def clear(self) -> None:
        self._runs.clear()

    def collect(self) -> Iterator[Metric]:
        latency = GaugeMetricFamily(
            "plnt_bench_latency_seconds",
            "Client-side invocation latency of the last bench, in seconds, by quantile "
            "(1 is the maximum); coordinated-omission corrected for open-loop benches.",
            labels=[*_LABELS, "quantile"],
        )
        rate = GaugeMetricFamily(
            "plnt_bench_rate_requests_per_second",
            "Request rate of the last bench: achieved, and requested (open-loop benches).",
            labels=[*_LABELS, "kind"],
        )
        requests = GaugeMetricFamily(
            "plnt_bench_requests", "Requests measured in the last bench.", labels=_LABELS
        )
        duration = GaugeMetricFamily(
            "plnt_bench_duration_seconds",
            "Length of the last bench's measured phase, in seconds.",
            labels=_LABELS,
        )
        errors = GaugeMetricFamily(
            "plnt_bench_error_ratio",
            "Fraction of the last bench's requests that failed (0..1).",
            labels=_LABELS,
        )
        cache = GaugeMetricFamily(
            "plnt_bench_cache_hit_ratio",
            "Step-cache hit rate over the last bench (0..1); absent when not measurable.",
            labels=_LABELS,
        )
        first_token = GaugeMetricFamily(
            "plnt_bench_time_to_first_token_seconds",
            "Time to first token of the last bench's streamed invocations, by quantile.",
            labels=[*_LABELS, "quantile"],
        )
        gpu = GaugeMetricFamily(
            "plnt_bench_gpu_utilization_ratio",
            "Mean GPU utilisation over the last bench (0..1); absent when not measurable.",
            labels=_LABELS,
        )
        for key, results in sorted(self._runs.items()):
            for result in results:
                labels = [key.namespace, key.name, str(result.get("label", ""))]
                _percentiles(latency, labels, result.get("latency"))
                _percentiles(first_token, labels, result.get("timeToFirstToken"))
                for kind, field in (("achieved", "achievedRate"), ("requested", "requestedRate")):
                    if (value := _number(result.get(field))) is not None:
                        rate.add_metric([*labels, kind], value)
                for family, field, scale in (
                    (requests, "requests", 1.0),
                    (duration, "durationSeconds", 1.0),
                    (errors, "errorRate", 1.0),
                    (cache, "cacheHitRate", 1.0),
                    (gpu, "gpuUtilization", 0.01),  # the harness reports DCGM's percent
                ):
                    if (value := _number(result.get(field))) is not None:
                        family.add_metric(labels, value * scale)
        yield from (latency, rate, requests, duration, errors, cache, first_token, gpu)


def _percentiles(family: GaugeMetricFamily, labels: list[str], value: Any) -> None:
    if not isinstance(value, Mapping) or not value.get("count"):
        return
    for quantile, field in (*_QUANTILES, _MAX):
        if (milliseconds := _number(value.get(field))) is not None:
            family.add_metric([*labels, quantile], milliseconds / 1000.0)


async def context(app: web.Application) -> AsyncIterator[None]:
    """An aiohttp cleanup context (after storage): follow WorkflowRuns while serving.
    WorkflowRun's install runs it (`install.INSTALL`)."""
    prefix = workflowruns.DEFINITION.key_prefix()
    async with following.exported(app, BenchGauges(), prefix=prefix, name="bench gauges"):
        yield
