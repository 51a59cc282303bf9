"""The recorder of Events about plnt's objects, which the rest of plnt uses.

The Event kind itself (its definition, strategy and columns) is `plnt.registry.coreevents`;
this module names no kind: it writes to whichever store serves core/v1 `events`. The
recorder is the `EventSink` of every store whose kind has transition rules
(`for_stores`): `ResourceStore.after_write` hands it each stored change, and after the
answer it derives the change's Events, builds them with `plnt.api.events.event_about`
(the one Event builder the saga uses too) and writes them; creation Events lost with a
process are recorded at the next start (`record_missing_creation_events`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from plnt.api import errors
from plnt.api.events import event_about
from plnt.api.meta import parse_time
from plnt.registry.changes import Change, Transition, TransitionRules
from plnt.registry.objects import Object, lookup
from plnt.registry.options import ListOptions, WriteOptions
from plnt.registry.store import ResourceStore

log = logging.getLogger("plnt.events")

EVENTS = ("", "events")
"""The store the recorder writes to, by (API group, resource): core/v1 Events."""


EventWriter = Callable[[Object], Awaitable[None]]
"""Where Events go instead of plnt's own store (in a cluster: the cluster's Events)."""


@dataclass(frozen=True, slots=True)
class _Derived:
    """A stored change whose Events the kind's rules derive when it is written."""

    change: Change
    rules: TransitionRules


def creation_event_name(meta: Mapping[str, Any], index: int = 0) -> str:
    """The one name the `index`th Event of an object's creation can have.

    `NAME.HEX`, as every Event (`event_name`), but the hex is the object's
    creationTimestamp in nanoseconds and the head of its uid: a creation Event
    written again (its first write lost with the process, then found missing at the
    next start) is refused as AlreadyExists instead of being recorded twice, and it
    still sorts before every later Event of the object.
    """
    try:
        nanos = int(parse_time(str(meta.get("creationTimestamp"))).timestamp()) * 10**9
    except ValueError:
        nanos = 0
    uid = str(meta.get("uid") or "").replace("-", "")[:8]
    suffix = f"{index:x}" if index else ""
    return f"{meta.get('name', 'unknown')}.{nanos:x}{uid}{suffix}"


class EventRecorder:
    """Records Events about plnt objects (what `kubectl describe` shows under Events:).

    Standalone, Events are stored in plnt's own `events` store; given a `writer` (in a
    cluster, `plnt.kube.events.ClusterEvents.write`), they go there instead.

    Recording is off the request path, as kube's event broadcaster is: a store's
    after-write step hands over the stored change and the kind's rules
    (`record_change`, one append), and one worker (owned by the server's cleanup
    context) takes everything pending at once, derives the transitions, builds the
    Events and writes them, after the answer went out. The writes of one batch run
    concurrently, up to `concurrent_writes` at once, one object's Events in order: one
    write at a time is bound by etcd's round trip, and at a thousand creates a second
    the queue would fill while the processor idles. Events are diagnostics, never
    acknowledged to a client; when too much is pending the newest is dropped and logged
    rather than slowing writes. An object's creation Events (WorkflowRun's `Accepted`)
    are the exception: what a crash, a full queue or a failed write lost is recorded
    again (`record_missing_creation_events`), under a name that makes a second copy
    impossible (`creation_event_name`).
    """

    def __init__(
        self,
        store: ResourceStore,
        *,
        component: str = "plnt",
        queue_size: int = 4096,
        concurrent_writes: int = 32,
        writer: EventWriter | None = None,
    ) -> None:
        self._store = store
        self._writer = writer
        self._component = component
        self._queue_size = queue_size
        self._concurrent_writes = concurrent_writes
        self._pending: collections.deque[_Derived] = collections.deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.dropped = 0
        self.creation_failures = 0
        """Creation Events whose write failed since the last `record_missing_creation_events`."""
        self.on_creation_failure: Callable[[], None] | None = None
        """Called when a creation Event could not be written (the retry pass's wake)."""

    @property
    def writes_to_store(self) -> bool:
        """Events go to plnt's own `events` store (standalone), which can be listed."""
        return self._writer is None

    def record_change(self, change: Change, rules: TransitionRules) -> None:
        """Queue the Events `rules` derive from `change`; they are derived after the answer."""
        self._enqueue(_Derived(change, rules), "transition")

    def _enqueue(self, item: _Derived, what: str) -> None:
        if len(self._pending) >= self._queue_size:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:  # one line, not one per Event
                log.warning(
                    "event queue full; dropped %s event for %s (%d dropped so far)",
                    what,
                    item.change.after.get("metadata", {}).get("name"),
                    self.dropped,
                )
            if item.change.created:
                self._creation_failed()
            return
        self._pending.append(item)
        self._idle.clear()
        self._wake.set()

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
        events = stores[EVENTS]
        recorder = cls(events, component=component, writer=writer)
        for store in stores.values():
            if store.definition.transitions is not None:
                store.events = recorder
        return recorder

    async def run(self) -> None:
        """Write what is pending, a batch at a time, until cancelled; a failed write is
        logged (a creation Event's is also counted for the retry pass)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = list(self._pending)
                self._pending.clear()
                await self._write_batch(batch)
            self._idle.set()

    async def _write_batch(self, batch: list[_Derived]) -> None:
        """Write the Events of `batch`: one object's in order, objects concurrently."""
        by_object: dict[str, list[tuple[Object, bool]]] = {}
        for item in batch:
            uid = str(item.change.after.get("metadata", {}).get("uid") or id(item))
            by_object.setdefault(uid, []).extend(self._events_of(item))
        groups = iter(by_object.values())

        async def writer() -> None:
            for written in groups:  # shared: each object's Events go to one writer
                for event, creation in written:
                    await self._write(event, creation=creation)

        writers = min(self._concurrent_writes, len(by_object))
        if writers <= 1:
            await writer()
            return
        async with asyncio.TaskGroup() as group:
            for _ in range(writers):
                group.create_task(writer())

    def _events_of(self, item: _Derived) -> list[tuple[Object, bool]]:
        """The Events of one pending change, each with whether it is a creation Event."""
        change, out = item.change, []
        for index, transition in enumerate(item.rules(change)):
            event = event_about(
                change.after,
                type=transition.type,
                reason=transition.reason,
                message=transition.message,
                component=self._component,
            )
            if change.created:
                event["metadata"]["name"] = creation_event_name(change.after["metadata"], index)
            out.append((event, change.created))
        return out

    async def _write(self, event: Object, *, creation: bool) -> None:
        try:
            if self._writer is not None:
                await self._writer(event)
            else:
                await self._store.create(
                    event["metadata"]["namespace"],
                    event,
                    WriteOptions(field_manager=self._component),
                )
        except errors.AlreadyExists:
            # A creation Event written again after a restart: it is there, once.
            log.debug("event %s already recorded", event["metadata"]["name"])
        except Exception as error:
            if isinstance(error, errors.APIError):
                # An expected refusal (the namespace is Terminating or gone): one line.
                log.info("event %s not recorded: %s", event["reason"], error)
            else:
                log.exception("could not record event %s", event["reason"])
            refused = isinstance(error, errors.APIError) and error.code < 500
            if creation and not refused:  # a refusal would be refused again
                self._creation_failed()

    def _creation_failed(self) -> None:
        """A creation Event was not written: count it and wake the retry pass."""
        self.creation_failures += 1
        if self.on_creation_failure is not None:
            self.on_creation_failure()

    async def flush(self) -> None:
        """Wait until every queued Event has been written (used at shutdown and in tests)."""
        await self._idle.wait()

    async def record_missing_creation_events(
        self, stores: Mapping[tuple[str, str], ResourceStore]
    ) -> int:
        """Queue the creation Events (WorkflowRun's `Accepted`) that no stored Event
        records, for every object of a kind with transition rules; how many were queued.

        What it repairs: a create acknowledged to its client whose Events were still
        pending when the process died, or whose write failed. Found by the involved
        object's uid and the Event's reason, and written under `creation_event_name`, so
        a run never gets two. Standalone only: a cluster's Events cannot be listed
        cheaply and expire there anyway (see docs/observability.md).
        """
        self.creation_failures = 0
        if self._writer is not None:
            return 0
        recorded = {
            (str(lookup(event, "involvedObject", "uid") or ""), str(event.get("reason") or ""))
            for event in (await self._store.list("", ListOptions())).items
        }
        queued = 0
        for store in stores.values():
            rules = store.definition.transitions
            if rules is None or store.events is not self:
                continue
            for obj in (await store.list("", ListOptions())).items:
                uid = str(obj["metadata"].get("uid") or "")
                created = Change(None, obj)
                missing = [t for t in rules(created) if (uid, t.reason) not in recorded]
                if missing:
                    self._enqueue(_Derived(created, _only(missing)), "creation")
                    queued += 1
        return queued


def _only(transitions: list[Transition]) -> TransitionRules:
    """Rules that derive exactly `transitions` (the missing ones, in their order)."""
    return lambda change: transitions
