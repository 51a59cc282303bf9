"""What the Bench page shows of a bench: its phase, progress, results and latency chart.

No I/O, no HTML. A result is the harness's JSON (`plnt.harness.result.BenchResult`), an
open object in the API (`plnt.api.bench`): every number is read with `views.number`, so
a result that lacks one (or holds something else there) shows "—" for it, and the
chart draws it as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plnt.api.headers import CacheMode
from plnt.ui import views

PERCENTILES = (("p50", "p50Ms"), ("p90", "p90Ms"), ("p95", "p95Ms"), ("p99", "p99Ms"))
MISSING = "—"


@dataclass(frozen=True, slots=True)
class LatencyBar:
    """One bar of the latency chart: a percentile of one revision, in SVG units."""

    label: str
    percentile: str
    ms: float
    x: float
    y: float
    width: float
    height: float
    series: int


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One revision's measured phase as the results table prints it."""

    label: str
    requests: str
    rate: str
    """Achieved requests per second."""
    latencies: tuple[str, ...]
    """p50, p90, p95, p99 and max, each as `12.3 ms`."""
    errors: str
    """The error rate in percent."""
    cache_hits: str
    """The step cache's hit rate in percent."""


@dataclass(frozen=True, slots=True)
class ProgressRow:
    """A running revision's snapshot."""

    label: str
    elapsed: str
    requests: int
    errors: int


@dataclass(frozen=True, slots=True)
class BenchView:
    """A bench (running or done) as the Bench page shows it."""

    id: str
    phase: str
    message: str
    progress: tuple[ProgressRow, ...]
    """One snapshot per revision while it runs."""
    results: tuple[ResultRow, ...]
    bars: tuple[LatencyBar, ...]
    scale_ms: float


CHART_WIDTH, CHART_HEIGHT = 600.0, 200.0


def _label(result: Mapping[str, Any], series: int) -> str:
    label = result.get("label")
    return str(series) if label is None or label == "" else str(label)


def _ms(result: Mapping[str, Any], key: str) -> float | None:
    return views.number(views.mapping(result.get("latency")).get(key))


def _fixed(value: float | None, unit: str, *, scale: float = 1.0, digits: int = 1) -> str:
    return MISSING if value is None else f"{value * scale:.{digits}f}{unit}"


def latency_bars(results: Sequence[Mapping[str, Any]]) -> tuple[list[LatencyBar], float]:
    """Grouped bars: for each percentile, one bar per result (revision), on one scale."""
    values = [max(_ms(result, key) or 0.0, 0.0) for result in results for _, key in PERCENTILES]
    top = max([*values, 0.001])
    group = CHART_WIDTH / len(PERCENTILES)
    width = (group * 0.8) / max(len(results), 1)
    bars: list[LatencyBar] = []
    for g, (name, key) in enumerate(PERCENTILES):
        for series, result in enumerate(results):
            ms = max(_ms(result, key) or 0.0, 0.0)
            height = ms / top * (CHART_HEIGHT - 20)
            bars.append(
                LatencyBar(
                    label=_label(result, series),
                    percentile=name,
                    ms=round(ms, 2),
                    x=round(g * group + group * 0.1 + series * width, 2),
                    y=round(CHART_HEIGHT - height, 2),
                    width=round(width, 2),
                    height=round(height, 2),
                    series=series,
                )
            )
    return bars, top


def result_row(
    result: Mapping[str, Any], series: int, target: Mapping[str, Any] | None = None
) -> ResultRow:
    """One result; its `target` (same position in `status.targets`) says whether the bench
    bypassed the step cache, which the cache column then says."""
    requests = views.integer(result.get("requests"))
    cache_hits = _fixed(views.number(result.get("cacheHitRate")), "%", scale=100, digits=0)
    if target is not None and target.get("cache") == CacheMode.BYPASS:
        cache_hits = f"{cache_hits} (bypassed)"
    return ResultRow(
        label=_label(result, series),
        requests=MISSING if requests is None else str(requests),
        rate=_fixed(views.number(result.get("achievedRate")), "/s"),
        latencies=tuple(
            _fixed(_ms(result, key), " ms") for key in ("p50Ms", "p90Ms", "p95Ms", "p99Ms", "maxMs")
        ),
        errors=_fixed(views.number(result.get("errorRate")), "%", scale=100),
        cache_hits=cache_hits,
    )


def bench_view(bench: Mapping[str, Any] | None) -> BenchView | None:
    """A `Bench` (from GET …/bench) or a `BenchRecord` (status.lastBench) for the page."""
    if not bench:
        return None
    # A record carries its id and phase itself; a Bench has them in metadata and status.
    record = "id" in bench
    status = bench if record else views.mapping(bench.get("status"))
    results = tuple(r for r in status.get("results") or [] if isinstance(r, Mapping))
    targets = [t if isinstance(t, Mapping) else {} for t in status.get("targets") or []]
    bars, top = latency_bars(results)
    progress = tuple(
        ProgressRow(
            label=str(p.get("label") or ""),
            elapsed=_fixed(views.number(p.get("elapsedSeconds")) or 0.0, " s"),
            requests=views.integer(p.get("requests")) or 0,
            errors=views.integer(p.get("errors")) or 0,
        )
        for p in status.get("progress") or []
        if isinstance(p, Mapping)
    )
    ident = bench.get("id") if record else views.mapping(bench.get("metadata")).get("name")
    return BenchView(
        id=str(ident or ""),
        # A Bench the API has not given a status yet is waiting to start (BenchStatus's default).
        phase=str(status.get("phase") or "Pending"),
        message=str(status.get("message") or ""),
        progress=progress,
        results=tuple(
            result_row(r, series, targets[series] if series < len(targets) else None)
            for series, r in enumerate(results)
        ),
        bars=tuple(bars),
        scale_ms=round(top, 2),
    )
