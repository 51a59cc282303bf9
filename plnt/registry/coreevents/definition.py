"""The Event kind's definition: kube's printer columns, field labels and Event rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from plnt.api.errors import Cause
from plnt.api.events import Event
from plnt.api.meta import parse_time
from plnt.registry import eventrules
from plnt.registry.definitions import READ_VERBS, VIEWERS, Grant, PrinterColumn, ResourceDefinition
from plnt.registry.objects import Object, lookup
from plnt.registry.strategy import Strategy
from plnt.registry.tables import human_duration


def _field_labels(obj: Object) -> dict[str, str]:
    fields = {
        f"involvedObject.{name}": str(lookup(obj, "involvedObject", name) or "")
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    }
    fields["reason"] = str(obj.get("reason") or "")
    fields["reportingComponent"] = str(obj.get("reportingComponent") or "")
    fields["source"] = str(lookup(obj, "source", "component") or "")
    fields["type"] = str(obj.get("type") or "")
    return fields


def _since(stamp: Any) -> str:
    """kube's translateTimestampSince: an age, or "<unknown>" without a time."""
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        moment = parse_time(stamp)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - moment).total_seconds())


def _first_seen(obj: Object) -> str:
    return _since(obj.get("firstTimestamp") or obj.get("eventTime"))


def _last_seen(obj: Object) -> str:
    series = lookup(obj, "series", "lastObservedTime")
    if series:
        return _since(series)
    if obj.get("lastTimestamp"):
        return _since(obj["lastTimestamp"])
    return _first_seen(obj)


def _count(obj: Object) -> int:
    count = lookup(obj, "series", "count") or obj.get("count") or 1
    return int(count) if isinstance(count, int) else 1


def _target(obj: Object) -> str:
    kind = str(lookup(obj, "involvedObject", "kind") or "").lower()
    name = lookup(obj, "involvedObject", "name")
    return f"{kind}/{name}" if name else kind


def _source(obj: Object) -> str:
    component = lookup(obj, "source", "component")
    if component:
        host = lookup(obj, "source", "host")
        return f"{component}, {host}" if host else str(component)
    controller = obj.get("reportingController") or obj.get("reportingComponent") or ""
    instance = obj.get("reportingInstance") or ""
    return f"{controller}, {instance}" if instance else str(controller)


# The columns of kube-apiserver's Event printer, in its order: `kubectl get events`
# prints LAST SEEN TYPE REASON OBJECT MESSAGE, and `-o wide` adds the rest.
COLUMNS: tuple[PrinterColumn, ...] = (
    PrinterColumn("Last Seen", "string", "Time since the event was last observed.", _last_seen),
    PrinterColumn("Type", "string", "Normal or Warning.", lambda o: o.get("type")),
    PrinterColumn("Reason", "string", "Why the event happened.", lambda o: o.get("reason")),
    PrinterColumn("Object", "string", "The object the event is about.", _target),
    PrinterColumn(
        "Subobject",
        "string",
        "The part of the object concerned.",
        lambda o: lookup(o, "involvedObject", "fieldPath"),
        priority=1,
    ),
    PrinterColumn("Source", "string", "The component reporting it.", _source, priority=1),
    PrinterColumn(
        "Message", "string", "What happened.", lambda o: str(o.get("message") or "").strip()
    ),
    PrinterColumn(
        "First Seen", "string", "Time since the event was first observed.", _first_seen, priority=1
    ),
    PrinterColumn("Count", "string", "How many times it happened.", _count, priority=1),
    PrinterColumn(
        "Name",
        "string",
        "Name must be unique within a namespace.",
        lambda o: lookup(o, "metadata", "name"),
        format="name",
        priority=1,
    ),
)


class EventStrategy(Strategy):
    """kube's eventStrategy: no status subresource, no generation, kube's Event rules
    (`eventrules`) and its time precisions."""

    def __init__(self) -> None:
        super().__init__(model=Event, has_status=False)

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        obj["metadata"].pop("generation", None)

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_update(obj, old)
        obj["metadata"].pop("generation", None)

    def validate_semantics(self, obj: Object) -> list[Cause]:
        return eventrules.causes(obj)

    def canonicalize(self, obj: Object, canonical: Object | None = None) -> None:
        super().canonicalize(obj, canonical)
        eventrules.normalise_times(obj)


DEFINITION = ResourceDefinition(
    group="",
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    model=Event,
    strategy=EventStrategy(),
    short_names=("ev",),
    verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
    description="A record of a state transition of some object.",
    columns=COLUMNS,
    field_labels=_field_labels,
    grants=(Grant(VIEWERS, READ_VERBS, ("",)),),  # viewers read what happened to runs
    builtin=True,
)
