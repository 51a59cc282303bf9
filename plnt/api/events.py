"""core/v1 Event, the record of every state transition (`kubectl describe` shows them)."""

from __future__ import annotations

import time
from collections.abc import Mapping
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
