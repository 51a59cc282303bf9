"""core/v1 Event, the record of every state transition (`kubectl describe` shows them)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from plnt.api.base import WireModel
from plnt.api.meta import ObjectMeta, now_rfc3339


class ObjectReference(WireModel):
    """The object an Event is about."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EventSource(WireModel):
    """Which component reported the Event."""

    component: str | None = None
    host: str | None = None


class EventSeries(WireModel):
    """Repetitions of an Event."""

    count: int | None = None
    last_observed_time: str | None = None


class Event(WireModel):
    """core/v1 Event."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Event"] = "Event"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    involved_object: ObjectReference
    reason: str | None = None
    message: str | None = None
    type: str | None = Field(default=None, description="Normal or Warning.")
    source: EventSource | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    event_time: str | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


MAX_MESSAGE = 1024  # what kube allows an Event's note/message


def event_name(involved: str) -> str:
    """`NAME.HEX(UnixNano)`, as client-go's recorder names Events: names sort in creation
    order, so Events written within one second still list in the order they happened."""
    return f"{involved}.{time.time_ns():x}"


def event_about(
    involved: Mapping[str, Any], *, type: str, reason: str, message: str, component: str
) -> dict[str, Any]:
    """A core/v1 Event about `involved` (an object as served, with uid), stamped now.

    The one shape both the API server's own recorder and the deploy saga's activities
    write, so `kubectl describe` lists them alike.
    """
    meta = involved.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    now = now_rfc3339()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name(meta.get("name", "unknown")), "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": type,
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


# -- repeats counted into one Event (client-go's event correlator) ---------------------

SERIES_WINDOW = 600.0
"""Seconds within which a repeat counts into the same Event (client-go: 10 minutes)."""
REMEMBERED = 4096
"""Distinct Events remembered for counting repeats (client-go's LRU is 4096 too)."""

CorrelationKey = tuple[str, ...]


def correlation_key(event: Mapping[str, Any]) -> CorrelationKey:
    """What makes two Events the same: the object, type, reason, message and source."""
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    return (
        str(involved.get("kind", "")),
        str(involved.get("namespace", "")),
        str(involved.get("name", "")),
        str(involved.get("uid", "")),
        str(event.get("type", "")),
        str(event.get("reason", "")),
        str(event.get("message", "")),
        str(source.get("component", "")),
    )


@dataclass(frozen=True)
class Repeat:
    """An Event seen recently: patch `name` in `namespace` to `count` instead of creating."""

    namespace: str
    name: str
    count: int

    def patch(self) -> dict[str, Any]:
        """The merge patch that counts one more repeat (kube's count and lastTimestamp)."""
        return {"count": self.count, "lastTimestamp": now_rfc3339()}


class EventCorrelator:
    """Remembers the Events a writer created, so a repeat of one within `window` seconds
    is counted into it (`count`, `lastTimestamp`) rather than written as a new Event.

    No I/O: the writers — `plnt.kube.events` (the API server's, to the cluster) and
    `plnt.client.events` (the worker's, through the API its kubeconfig names) — ask
    `repeat_of` before writing and `remember` what they wrote.
    """

    def __init__(
        self,
        *,
        window: float = SERIES_WINDOW,
        remembered: int = REMEMBERED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window
        self._remembered = remembered
        self._clock = clock
        # key → (namespace, name, count, clock time last written)
        self._seen: OrderedDict[CorrelationKey, tuple[str, str, int, float]] = OrderedDict()

    def repeat_of(self, event: Mapping[str, Any]) -> Repeat | None:
        """The recent Event `event` repeats, with its count after this repeat; None: new."""
        previous = self._seen.get(correlation_key(event))
        if previous is None or self._clock() - previous[3] >= self._window:
            return None
        namespace, name, count, _ = previous
        return Repeat(namespace, name, count + 1)

    def remember(self, event: Mapping[str, Any], *, namespace: str, name: str, count: int) -> None:
        """`event` was written as `namespace/name`, `count` times so far."""
        key = correlation_key(event)
        self._seen[key] = (namespace, name, count, self._clock())
        self._seen.move_to_end(key)
        while len(self._seen) > self._remembered:
            self._seen.popitem(last=False)

    def forget(self, event: Mapping[str, Any]) -> None:
        """The Event `event` was counted into is gone (expired): the next one is new."""
        self._seen.pop(correlation_key(event), None)
