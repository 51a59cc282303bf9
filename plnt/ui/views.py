"""What the pages show, computed from API objects: no I/O, no HTML, no clock of its own.

Every function takes the objects as the API answered them (camelCase JSON) and the
current time, and returns plain data the templates lay out, so the arithmetic of the
timeline and the histogram is tested without a browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plnt.api.meta import parse_time
from plnt.client.clients import event_time

TIMELINE_WIDTH = 1000.0
"""Width of the timeline's drawing area in SVG user units (the viewBox scales it)."""

COMPENSATION_STEP = "rollback"
"""The saga's timeline entry that records a deploy's compensation (docs/sagas.md)."""


def parsed_time(value: Any) -> datetime | None:
    """A timestamp as the API wrote it; None when it is missing or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def duration_text(seconds: float | None) -> str:
    """`<1 s`, `42 s`, `3 m 05 s`, `2 h 10 m`: how long, at the precision a person reads."""
    if seconds is None:
        return ""
    if seconds < 1:
        return "<1 s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} m {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} m"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def age(timestamp: Any, now: datetime) -> str:
    """kubectl's AGE column, roughly: the time since `timestamp`."""
    moment = parsed_time(timestamp)
    if moment is None:
        return ""
    return duration_text(max(0.0, (now - moment).total_seconds())).replace(" ", "")


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One saga step as a bar: where it starts and how wide it is, in SVG units."""

    name: str
    state: str
    attempts: int
    message: str
    duration: str
    x: float
    width: float
    compensation: bool
    started: bool


@dataclass(frozen=True, slots=True)
class Timeline:
    rows: tuple[TimelineRow, ...]
    span: str
    """How long the whole deploy took (or has taken so far)."""


def timeline(saga: Sequence[Mapping[str, Any]] | None, now: datetime) -> Timeline:
    """The saga's steps as a Gantt chart: bars on one time axis from the first start.

    A running step's bar ends now; a pending step has none. Timestamps have second
    precision, so a bar is at least a sliver wide and shown after the one before it.
    """
    steps = list(saga or [])
    starts = [t for t in (parsed_time(s.get("startTime")) for s in steps) if t is not None]
    if not starts:
        rows = tuple(
            TimelineRow(
                name=str(s.get("name", "")),
                state=str(s.get("state", "Pending")),
                attempts=int(s.get("attempts") or 0),
                message=str(s.get("message") or ""),
                duration="",
                x=0.0,
                width=0.0,
                compensation=_is_compensation(s),
                started=False,
            )
            for s in steps
        )
        return Timeline(rows, "")
    origin = min(starts)
    ends: list[datetime] = []
    for step in steps:
        end = parsed_time(step.get("endTime"))
        if end is None and step.get("state") == "Running":
            end = now
        if end is not None:
            ends.append(end)
    finish = max([*ends, *starts])
    total = max((finish - origin).total_seconds(), 1.0)
    scale = TIMELINE_WIDTH / total
    minimum = TIMELINE_WIDTH / 200
    rows_list: list[TimelineRow] = []
    for step in steps:
        state = str(step.get("state", "Pending"))
        start = parsed_time(step.get("startTime"))
        end = parsed_time(step.get("endTime")) or (now if state == "Running" else None)
        seconds = None if start is None or end is None else (end - start).total_seconds()
        x = 0.0 if start is None else (start - origin).total_seconds() * scale
        width = 0.0 if seconds is None else max(seconds * scale, minimum)
        x = min(x, TIMELINE_WIDTH - width)
        rows_list.append(
            TimelineRow(
                name=str(step.get("name", "")),
                state=state,
                attempts=int(step.get("attempts") or 0),
                message=str(step.get("message") or ""),
                duration=duration_text(seconds),
                x=round(x, 2),
                width=round(width, 2),
                compensation=_is_compensation(step),
                started=start is not None,
            )
        )
    return Timeline(tuple(rows_list), duration_text((finish - origin).total_seconds()))


def _is_compensation(step: Mapping[str, Any]) -> bool:
    return step.get("name") == COMPENSATION_STEP or step.get("state") == "Compensated"


def traffic_text(traffic: Iterable[Mapping[str, Any]] | None) -> str:
    """`r3 90% · r4 10%`: the revisions that take invocations and their shares."""
    parts = [f"r{t.get('revision')} {t.get('weight', 0)}%" for t in traffic or ()]
    return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class TrafficBar:
    """One revision's share of traffic as a segment of a 1000-unit bar."""

    revision: int
    weight: int
    x: float
    width: float
    replicas: int
    index: int


def traffic_bars(traffic: Iterable[Mapping[str, Any]] | None) -> list[TrafficBar]:
    bars: list[TrafficBar] = []
    x = 0.0
    for index, target in enumerate(traffic or ()):
        weight = int(target.get("weight") or 0)
        bars.append(
            TrafficBar(
                revision=int(target.get("revision") or 0),
                weight=weight,
                x=x,
                width=weight * 10.0,
                replicas=len(target.get("endpoints") or []),
                index=index,
            )
        )
        x += weight * 10.0
    return bars


@dataclass(frozen=True, slots=True)
class RunRow:
    """One line of the Runs page."""

    name: str
    phase: str
    revision: str
    traffic: str
    ready: str
    age: str
    backend: str


def run_row(run: Mapping[str, Any], now: datetime) -> RunRow:
    meta = run.get("metadata") or {}
    spec = run.get("spec") or {}
    status = run.get("status") or {}
    wanted = spec.get("replicas", 1)
    ready = status.get("readyReplicas")
    return RunRow(
        name=str(meta.get("name", "")),
        phase=str(status.get("phase") or "Pending"),
        revision="" if status.get("revision") is None else str(status["revision"]),
        traffic=traffic_text(status.get("traffic")),
        ready=f"{ready or 0}/{wanted}",
        age=age(meta.get("creationTimestamp"), now),
        backend=str(status.get("backend") or ((spec.get("backend") or {}).get("name") or "")),
    )


def run_rows(runs: Iterable[Mapping[str, Any]], now: datetime) -> list[RunRow]:
    """The Runs page's lines, by name."""
    return sorted((run_row(run, now) for run in runs), key=lambda row: row.name)


@dataclass(frozen=True, slots=True)
class HistoryRow:
    revision: int
    digest: str
    ref: str
    backend: str
    promoted: str
    reason: str
    current: bool
    weight: int | None


def history(status: Mapping[str, Any] | None) -> list[HistoryRow]:
    """Promoted revisions, newest first, with the share of traffic each takes now."""
    status = status or {}
    weights = {t.get("revision"): int(t.get("weight") or 0) for t in status.get("traffic") or []}
    rows = [
        HistoryRow(
            revision=int(record.get("revision") or 0),
            digest=str(record.get("digest") or ""),
            ref=str(record.get("ref") or ""),
            backend=str(record.get("backend") or ""),
            promoted=str(record.get("promotedAt") or ""),
            reason=str(record.get("reason") or ""),
            current=record.get("revision") == status.get("revision"),
            weight=weights.get(record.get("revision")),
        )
        for record in status.get("history") or []
    ]
    return sorted(rows, key=lambda row: row.revision, reverse=True)


@dataclass(frozen=True, slots=True)
class InvocationRow:
    """One entry of the invocation log."""

    time: str
    revision: str
    status: int
    error: bool
    duration: str
    hops: tuple[tuple[str, str], ...]
    cache: str
    path: str


def invocation_row(entry: Mapping[str, Any]) -> InvocationRow:
    status = int(entry.get("status") or 0)
    timings = entry.get("timingsMs") or {}
    hops = tuple(
        (str(name), f"{float(ms):.1f} ms")
        for name, ms in timings.items()
        if isinstance(ms, int | float)
    )
    duration = entry.get("durationMs")
    return InvocationRow(
        time=str(entry.get("time") or ""),
        revision="" if entry.get("revision") is None else str(entry["revision"]),
        status=status,
        error=status >= 400,
        duration="" if not isinstance(duration, int | float) else f"{float(duration):.1f} ms",
        hops=hops,
        cache=str(entry.get("cache") or ""),
        path=str(entry.get("path") or ""),
    )


@dataclass(frozen=True, slots=True)
class BackendRow:
    name: str
    type: str
    endpoint: str
    reachable: str
    latency: str
    in_flight: str
    queue: str
    gpu_headroom: str
    models: str


def _known(value: Any, unit: str = "") -> str:
    return "—" if value is None else f"{value}{unit}"


def backend_row(backend: Mapping[str, Any]) -> BackendRow:
    spec = backend.get("spec") or {}
    status = backend.get("status") or {}
    reachable = status.get("reachable")
    models = status.get("loadedModels") or spec.get("models") or []
    return BackendRow(
        name=str((backend.get("metadata") or {}).get("name", "")),
        type=str(spec.get("type") or ""),
        endpoint=str(spec.get("endpoint") or "—"),
        reachable="—" if reachable is None else ("yes" if reachable else "no"),
        latency=_known(status.get("latencyMilliseconds"), " ms"),
        in_flight=_known(status.get("inFlight")),
        queue=_known(status.get("queueDepth")),
        gpu_headroom=_known(status.get("gpuHeadroom")),
        models=", ".join(str(m) for m in models) or "—",
    )


BACKEND_EVENTS_SHOWN = 5
"""How many of a backend's Events the Backends page shows under it, newest first."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """One Event as a page lists it: kubectl's columns, the age since it last happened."""

    type: str
    reason: str
    message: str
    count: int
    last_seen: str


def _count(event: Mapping[str, Any]) -> int:
    count = (event.get("series") or {}).get("count") or event.get("count") or 1
    return count if isinstance(count, int) else 1


def backend_events(
    events: Iterable[Mapping[str, Any]], now: datetime, *, shown: int = BACKEND_EVENTS_SHOWN
) -> dict[str, list[EventRow]]:
    """Each PlntBackend's most recent Events (by the name of the backend they are about),
    newest first, at most `shown` each; Events about other kinds are left out."""
    by_backend: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "PlntBackend" or not involved.get("name"):
            continue
        by_backend.setdefault(str(involved["name"]), []).append(event)
    return {
        name: [
            EventRow(
                type=str(e.get("type") or "Normal"),
                reason=str(e.get("reason") or ""),
                message=str(e.get("message") or e.get("note") or ""),
                count=_count(e),
                last_seen=age(event_time(e), now),
            )
            # Timestamps have seconds: Events of the same second keep the order they were
            # listed and watched in (the order they were created), the later one first.
            for e in sorted(reversed(found), key=event_time, reverse=True)[:shown]
        ]
        for name, found in by_backend.items()
    }


PERCENTILES = (("p50", "p50Ms"), ("p90", "p90Ms"), ("p95", "p95Ms"), ("p99", "p99Ms"))


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
class BenchView:
    """A bench (running or done) as the Bench page shows it."""

    id: str
    phase: str
    message: str
    progress: tuple[tuple[str, float, int, int], ...]
    """(label, elapsed seconds, requests, errors) per revision while it runs."""
    results: tuple[Mapping[str, Any], ...]
    bars: tuple[LatencyBar, ...]
    scale_ms: float


CHART_WIDTH, CHART_HEIGHT = 600.0, 200.0


def latency_bars(results: Sequence[Mapping[str, Any]]) -> tuple[list[LatencyBar], float]:
    """Grouped bars: for each percentile, one bar per result (revision), on one scale."""
    values = [
        float((result.get("latency") or {}).get(key) or 0.0)
        for result in results
        for _, key in PERCENTILES
    ]
    top = max([*values, 0.001])
    group = CHART_WIDTH / len(PERCENTILES)
    width = (group * 0.8) / max(len(results), 1)
    bars: list[LatencyBar] = []
    for g, (name, key) in enumerate(PERCENTILES):
        for series, result in enumerate(results):
            ms = float((result.get("latency") or {}).get(key) or 0.0)
            height = ms / top * (CHART_HEIGHT - 20)
            bars.append(
                LatencyBar(
                    label=str(result.get("label") or series),
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


def bench_view(bench: Mapping[str, Any] | None) -> BenchView | None:
    """A `Bench` (from GET …/bench) or a `BenchRecord` (status.lastBench) for the page."""
    if not bench:
        return None
    status = bench.get("status") if "status" in bench else bench
    status = status or {}
    results = tuple(r for r in status.get("results") or [] if isinstance(r, Mapping))
    bars, top = latency_bars(results)
    progress = tuple(
        (
            str(p.get("label", "")),
            float(p.get("elapsedSeconds") or 0.0),
            int(p.get("requests") or 0),
            int(p.get("errors") or 0),
        )
        for p in status.get("progress") or []
    )
    ident = (bench.get("metadata") or {}).get("name") if "metadata" in bench else bench.get("id")
    return BenchView(
        id=str(ident or ""),
        phase=str(status.get("phase") or bench.get("phase") or ""),
        message=str(status.get("message") or ""),
        progress=progress,
        results=results,
        bars=tuple(bars),
        scale_ms=round(top, 2),
    )
