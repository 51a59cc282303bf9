"""What the pages show, computed from API objects: no I/O, no HTML, no clock of its own.

Every function takes the objects as the API answered them (camelCase JSON) and the
current time, and returns plain data the templates lay out, so the arithmetic of the
timeline and the histogram is tested without a browser. Templates read only such typed
values, never an API object: a field the API left out is None or "" here, said once,
instead of an error in whichever template reads it (the environment's undefined is
strict, so a template that names a field no view has fails in the tests).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from plnt.api.meta import parse_time
from plnt.client.clients import event_time

TIMELINE_WIDTH = 1000.0
"""Width of the timeline's drawing area in SVG user units (the viewBox scales it)."""

COMPENSATION_STEP = "rollback"
"""The saga's timeline entry that records a deploy's compensation (docs/sagas.md)."""


def parsed_time(value: Any) -> datetime | None:
    """A timestamp as the API wrote it; None when it is missing or malformed. One without
    an offset is taken as UTC (the API's zone): a naive time beside an aware one would
    make every comparison and subtraction of the two raise."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = parse_time(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (null, text, booleans, objects)
    and for a value that is not finite, so a page formats only what it can."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def integer(value: Any) -> int | None:
    """A JSON integer; None for anything else (booleans included)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field left out or null)."""
    return value if isinstance(value, Mapping) else {}


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
        name=str(meta.get("name") or ""),
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
    signed_by: str = ""


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
            signed_by=str(record.get("signedBy") or ""),
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
        name=str((backend.get("metadata") or {}).get("name") or ""),
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
    count = mapping(event.get("series")).get("count") or event.get("count") or 1
    return count if isinstance(count, int) else 1


def event_row(event: Mapping[str, Any], now: datetime) -> EventRow:
    return EventRow(
        type=str(event.get("type") or "Normal"),
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or event.get("note") or ""),
        count=_count(event),
        last_seen=age(event_time(event), now),
    )


def event_rows(events: Iterable[Mapping[str, Any]], now: datetime) -> list[EventRow]:
    """Events newest first (by when they last happened); Events of the same second keep
    the order they were listed and watched in (the order they were created), the later
    one first, as timestamps have seconds."""
    return [event_row(e, now) for e in sorted(reversed(list(events)), key=event_time, reverse=True)]


def backend_events(
    events: Iterable[Mapping[str, Any]], now: datetime, *, shown: int = BACKEND_EVENTS_SHOWN
) -> dict[str, list[EventRow]]:
    """Each PlntBackend's most recent Events (by the name of the backend they are about),
    newest first, at most `shown` each; Events about other kinds are left out."""
    by_backend: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        involved = mapping(event.get("involvedObject"))
        if involved.get("kind") != "PlntBackend" or not involved.get("name"):
            continue
        by_backend.setdefault(str(involved["name"]), []).append(event)
    return {name: event_rows(found, now)[:shown] for name, found in by_backend.items()}
