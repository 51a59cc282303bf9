"""Watch semantics: which events a client sees, from where, and when it is told it is synced.

Rules (k8s.io/apiserver's cacher and watch handler):

* resourceVersion "" or "0": synthetic ADDED events for every matching object,
  then changes after that point.
* resourceVersion N: only changes after N; N compacted → one ERROR event with a
  410 Expired Status, then the stream ends.
* sendInitialEvents=true (WatchList): the ADDED events, then a BOOKMARK annotated
  `k8s.io/initial-events-end: "true"` carrying the list revision, then changes.
* BOOKMARK events only when the client asked (allowWatchBookmarks).
* With selectors, an object that stops matching is sent as DELETED and one that
  starts matching as ADDED, so a client's view is always the filtered set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol

from plnt.api import errors
from plnt.registry import storageerrors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import ListOptions, ListPage, has_filters
from plnt.registry.storedobjects import parse_resource_version
from plnt.storage.interface import Buffered, KeyValue, Store, WatchEvent

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WatchItem = tuple[str, Object]


class Watched(Protocol):
    """What a watch reads of its resource's store (`ResourceStore` is one)."""

    @property
    def definition(self) -> ResourceDefinition: ...

    @property
    def storage(self) -> Store: ...

    async def list(self, namespace: str, options: ListOptions) -> ListPage:
        """The initial state: a list at one revision (API errors only)."""
        ...

    def read(self, kv: KeyValue) -> Object:
        """The served object of `kv`, shared between readers."""
        ...

    def matches(self, obj: Object, options: ListOptions) -> bool:
        """Whether `obj` passes the label and field selectors of `options`."""
        ...


class Watch:
    """An async context manager and iterator of (event type, object) pairs."""

    def __init__(
        self,
        store: Watched,
        namespace: str,
        options: ListOptions,
        *,
        send_initial_events: bool | None = None,
        allow_bookmarks: bool = False,
        bookmark_interval: float = 60.0,
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._options = options
        rv = options.resource_version
        self._initial = send_initial_events if send_initial_events is not None else rv in ("", "0")
        self._end_bookmark = bool(send_initial_events)
        self._allow_bookmarks = allow_bookmarks
        self._bookmark_interval = bookmark_interval
        self._initial_items: list[Object] = []
        self._initial_left = 0
        self._buffered: Buffered | None = None
        self._filtered = has_filters(options)
        self._revision = 0
        self._error: errors.APIError | None = None
        self._live = False
        """The iterator is past its initial events: storage events are next."""
        self._source: AbstractAsyncContextManager[AsyncIterator[WatchEvent]] | None = None
        self._events: AsyncIterator[WatchEvent] | None = None

    async def __aenter__(self) -> Watch:

        options = self._options
        try:
            if self._initial:
                rv = options.resource_version
                page = await self._store.list(
                    self._namespace,
                    ListOptions(
                        label_selector=options.label_selector,
                        field_selector=options.field_selector,
                        resource_version="" if rv == "0" else rv,
                    ),
                )
                self._initial_items = page.items
                self._revision = int(page.resource_version)
            else:
                self._revision = parse_resource_version(options.resource_version)
        except errors.Expired as error:  # the list's revision was compacted
            self._error = error
            return self
        try:
            with storageerrors.translated(self._store.definition):
                self._source = self._store.storage.watch(
                    self._store.definition.key_prefix(self._namespace),
                    after_revision=self._revision,
                    progress_interval=self._bookmark_interval if self._allow_bookmarks else None,
                )
                self._events = await self._source.__aenter__()
        except errors.APIError as error:  # what storage refused, as the stream's ERROR event
            self._error = error
            return self
        if not self._filtered and isinstance(self._events, Buffered):
            self._buffered = self._events
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._source is not None:
            await self._source.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> AsyncIterator[WatchItem]:
        return self._iterate()

    def ready(self) -> bool:
        """True when the next item will come without waiting (the caller may delay its flush).

        With selectors a buffered event may be filtered out, so only unfiltered
        watches count buffered storage events.
        """
        if self._initial_left:
            return True
        return self._buffered is not None and self._buffered.pending() > 0

    def take_ready(self) -> list[WatchItem]:
        """The items that would come next without waiting, taken at once (else []).

        Only for an unfiltered watch served from memory once its initial events
        are out, between two items of the iterator: what it returns is exactly what
        the iterator would have yielded next, so a caller may interleave the two.
        """
        if self._buffered is None or not self._live:
            return []
        items = []
        for event in self._buffered.take_ready():
            item = self._unfiltered(event)
            if item is not None:
                items.append(item)
        return items

    def _bookmark(self, revision: int, *, initial_end: bool = False) -> Object:
        d = self._store.definition
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": d.kind, "apiVersion": d.api_version, "metadata": meta}

    async def _iterate(self) -> AsyncIterator[WatchItem]:

        if self._error is not None:
            yield "ERROR", self._error.to_status()
            return
        visible: set[str] = set()
        # Names the client holds; only selectors need them (see `_filter`).
        items, self._initial_items = self._initial_items, []
        self._initial_left = len(items)
        for obj in items:
            self._initial_left -= 1
            if self._filtered:
                visible.add(obj["metadata"]["name"])
            yield "ADDED", obj
        if self._end_bookmark:
            yield "BOOKMARK", self._bookmark(self._revision, initial_end=True)
        assert self._events is not None
        self._live = True
        try:
            with storageerrors.translated(self._store.definition):
                async for event in self._events:
                    if event.type == "PROGRESS":
                        if self._allow_bookmarks:
                            yield "BOOKMARK", self._bookmark(event.revision)
                        continue
                    if not self._filtered:
                        # Nothing can start or stop matching: the event as stored, with no
                        # per-watcher bookkeeping (the same for all of a prefix's watchers).
                        unfiltered = self._unfiltered(event)
                        if unfiltered is not None:
                            yield unfiltered
                        continue
                    if event.kv is None:
                        continue
                    item = self._filter(event, self._object(event, event.kv), visible)
                    if item is not None:
                        yield item
        except errors.APIError as error:  # storage's, from the `translated` block
            yield "ERROR", error.to_status()

    def _object(self, event: WatchEvent, kv: KeyValue) -> Object:
        """The served object of a change event (shared between watchers when possible)."""
        obj = self._store.read(kv)
        if event.type == "DELETED" and kv.mod_revision != event.revision:
            # The last state, at the delete's revision (a copy: `read` is shared).
            # The storage stamps a DELETED kv with that revision already, so every
            # watcher normally shares one object (and one encoded line).
            meta = {**obj["metadata"], "resourceVersion": str(event.revision)}
            obj = {**obj, "metadata": meta}
        return obj

    def _unfiltered(self, event: WatchEvent) -> WatchItem | None:
        """An unfiltered watch's item for a storage event (None: nothing to send)."""
        if event.kv is None:  # PROGRESS: `_iterate` turns it into a bookmark
            return None
        return event.type, self._object(event, event.kv)

    def _filter(self, event: WatchEvent, obj: Object, visible: set[str]) -> WatchItem | None:
        """Apply selectors, turning "starts/stops matching" into ADDED/DELETED."""
        name = obj["metadata"]["name"]
        if event.type == "DELETED":
            matched = self._store.matches(obj, self._options)
            was_visible = name in visible
            visible.discard(name)
            return ("DELETED", obj) if (matched or was_visible) else None
        now = self._store.matches(obj, self._options)
        if event.type == "ADDED":
            if now:
                visible.add(name)
                return "ADDED", obj
            return None
        if event.prev is not None:
            before = self._store.matches(self._store.read(event.prev), self._options)
        else:
            before = name in visible or not self._initial
        if now:
            visible.add(name)
            return ("MODIFIED" if before else "ADDED"), obj
        visible.discard(name)
        if before:
            return "DELETED", obj
        return None
