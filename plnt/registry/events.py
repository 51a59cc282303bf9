"""core/v1 Events as plnt stores them in standalone mode, and the recorder the rest of plnt uses.

The recorder is the `EventSink` of every store whose kind has transition rules
(`for_stores`): `ResourceStore.after_write` hands it the Events of each stored change,
built by `plnt.api.events.event_about`, the one Event builder the saga uses too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from plnt.api import errors
from plnt.api.errors import Cause
from plnt.api.events import Event, event_about
from plnt.api.meta import parse_time
from plnt.registry import eventrules
from plnt.registry.definitions import READ_VERBS, VIEWERS, Grant, PrinterColumn, ResourceDefinition
from plnt.registry.objects import Object, lookup
from plnt.registry.options import WriteOptions
from plnt.registry.store import ResourceStore
from plnt.registry.strategy import Strategy
from plnt.registry.tables import human_duration

log = logging.getLogger("plnt.events")


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

    def canonicalize(self, obj: Object) -> None:
        super().canonicalize(obj)
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


EventWriter = Callable[[Object], Awaitable[None]]
"""Where Events go instead of plnt's own store (in a cluster: the cluster's Events)."""


class EventRecorder:
    """Records Events about plnt objects (what `kubectl describe` shows under Events:).

    Standalone, Events are stored in plnt's own `events` store; given a `writer` (in a
    cluster, `plnt.kube.events.ClusterEvents.write`), they go there instead.

    Recording is off the request path, as kube's event broadcaster is: `record`
    only queues, and one worker (owned by the server's cleanup context) writes the
    queue to storage. Events are diagnostics, never acknowledged to a client; when
    the queue is full the newest is dropped and logged rather than slowing writes.
    """

    def __init__(
        self,
        store: ResourceStore,
        *,
        component: str = "plnt",
        queue_size: int = 4096,
        writer: EventWriter | None = None,
    ) -> None:
        self._store = store
        self._writer = writer
        self._component = component
        self._queue: asyncio.Queue[Object] = asyncio.Queue(maxsize=queue_size)
        self.dropped = 0

    def record(self, involved: Object, *, type: str, reason: str, message: str) -> None:
        """Queue an Event about `involved` (an object as served, with uid)."""
        try:
            self._queue.put_nowait(
                event_about(
                    involved, type=type, reason=reason, message=message, component=self._component
                )
            )
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "event queue full; dropped %s event for %s",
                reason,
                involved.get("metadata", {}).get("name"),
            )

    @classmethod
    def for_stores(
        cls,
        stores: Mapping[tuple[str, str], ResourceStore],
        *,
        component: str = "plnt",
        writer: EventWriter | None = None,
    ) -> EventRecorder:
        """A recorder writing to the `events` store of `stores` (or to `writer`), wired as
        the Event sink of every store whose kind has transition rules."""
        events = stores[(DEFINITION.group, DEFINITION.plural)]
        recorder = cls(events, component=component, writer=writer)
        for store in stores.values():
            if store.definition.transitions is not None:
                store.events = recorder
        return recorder

    async def run(self) -> None:
        """Write queued Events until cancelled; a failed write is logged, not retried."""
        while True:
            event = await self._queue.get()
            try:
                if self._writer is not None:
                    await self._writer(event)
                else:
                    await self._store.create(
                        event["metadata"]["namespace"],
                        event,
                        WriteOptions(field_manager=self._component),
                    )
            except errors.APIError as error:
                # An expected refusal (the namespace is Terminating or gone): one line.
                log.info("event %s not recorded: %s", event["reason"], error)
            except Exception:
                log.exception("could not record event %s", event["reason"])
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued Event has been written (used at shutdown and in tests)."""
        await self._queue.join()
