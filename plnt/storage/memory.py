"""`MemoryStore`: the `Store` protocol in one process's memory, for tests and embedding.

What it is for: running the registry (and anything above it) where etcd is not what is
being tested or is not wanted, such as registry tests, or a single process that keeps
its objects only while it runs. It passes the same conformance suite as `EtcdStore`
and `CachedStore` (`tests/storage/test_store_conformance.py`), so code that works on
it sees etcd's semantics:

* one revision counter for the whole store, starting at 1 as etcd's does; every write
  takes the next revision, and a value's `mod_revision` is its resourceVersion;
* create, compare-and-swap updates and deletes with etcd's errors (KeyExists,
  KeyNotFound, Conflict carrying the current revision);
* lists in key order, paged with the continue tokens of `continuation` (the etcd
  store's format), at the latest revision or at an older one still in the history;
* watches from any revision still in the history, without gaps, with `prev` on
  MODIFIED and DELETED, PROGRESS when idle and asked for;
* `compact(revision)` drops the history before `revision`; reads and watches before
  it raise Expired from then on, as after etcd's compaction.

How: the state is one `cached_prefixes.CachedPrefix` over the whole key space, the
structure the watch cache keeps per prefix, fed by this store's own writes instead of
etcd's watch. So values, the sorted keys, the history ring and the watchers (bounded
queues, paced wake-ups, `interface.Buffered`) behave as the watch cache's do.

Limits: nothing survives the process, and nothing is shared with another process (a
second API server cannot use it, so `consistent` changes nothing here). The history
keeps the last `history_size` changes (as the watch cache's ring does): a read or watch
from before them is Expired, as from before a compaction. A read at an older revision
replays the history backwards, so it costs the writes made since. A watch from a
revision not written yet waits up to `future_wait` seconds for it, then raises
TooLargeRevision. A watcher whose consumer falls `watcher_queue_size` events behind is
ended (its iterator stops after what it holds), like the watch cache's. All of it is
one event loop's: no locks, no threads.

Errors: `plnt.storage.errors`, as for every store.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from types import TracebackType

from plnt.storage import cached_prefixes, continuation, errors
from plnt.storage.interface import KeyValue, ListResult, Mutate, WatchEvent

_FIRST_REVISION = 1
"""An empty etcd is at revision 1; its first write is revision 2."""


class MemoryStore:
    """A `plnt.storage.interface.Store` held in memory (see the module docstring)."""

    def __init__(
        self,
        *,
        history_size: int = 10_000,
        watcher_queue_size: int = 1_000,
        future_wait: float = 3.0,
    ) -> None:
        self._data = cached_prefixes.CachedPrefix("", history_size=history_size)
        self._data.load([], _FIRST_REVISION)
        self._data.history_start = 0  # the history holds every change: watch from 0 on
        self._compacted = 0
        """The revision of the last compaction: earlier revisions cannot be read."""
        self._watcher_queue_size = watcher_queue_size
        self._future_wait = future_wait

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """End every watch (its iterator stops); the data stays readable."""
        for watcher in tuple(self._data.watchers):
            watcher.end()

    # -- reads ----------------------------------------------------------------------------

    async def get(self, key: str, *, consistent: bool = True) -> KeyValue:
        return self._data.get(key)

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        revision: int = 0,
        consistent: bool = True,
    ) -> ListResult:
        revision, start = continuation.resume(prefix, continue_token, revision)
        read_revision = revision or self._data.revision
        keys, items = self._state_at(read_revision)
        return cached_prefixes.page(
            keys, items, prefix, start=start, limit=limit, revision=read_revision
        )

    async def current_revision(self) -> int:
        return self._data.revision

    def _state_at(self, revision: int) -> tuple[Sequence[str], dict[str, KeyValue]]:
        """The sorted keys and the values as they were at `revision` (Expired if compacted
        or out of the history, TooLargeRevision if not written yet)."""
        data = self._data
        if revision > data.revision:
            raise errors.TooLargeRevision(
                f"revision {revision} is newer than the store's {data.revision}",
                revision=revision,
                current_revision=data.revision,
            )
        oldest = max(self._compacted, data.history_start)
        if revision < oldest:
            raise errors.Expired(
                f"revision {revision} has been compacted (the store reads from {oldest})",
                revision=revision,
                compacted_revision=oldest,
            )
        if revision == data.revision:
            return data.keys, data.items
        items = dict(data.items)
        for event in reversed(data.history):  # undo the changes after `revision`
            if event.revision <= revision:
                break
            assert event.kv is not None
            if event.prev is None:
                del items[event.kv.key]
            else:
                items[event.kv.key] = event.prev
        return sorted(items), items

    # -- writes ---------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        if key in self._data.items:
            raise errors.KeyExists(f"key {key!r} already exists", key=key)
        revision = self._data.revision + 1
        kv = KeyValue(key, value, revision, revision)
        self._data.apply(WatchEvent("ADDED", revision, kv))
        return kv

    async def guaranteed_update(
        self, key: str, mutate: Mutate, *, expected_revision: int = 0
    ) -> KeyValue:
        """See `Store.guaranteed_update`. Nothing can write between the read and the write
        (`mutate` is synchronous and nothing here awaits), so one attempt always lands."""
        current = await self.get(key)
        if expected_revision and current.mod_revision != expected_revision:
            raise errors.Conflict.stale(
                key, current_revision=current.mod_revision, expected_revision=expected_revision
            )
        new_value = mutate(current)
        if new_value is None or new_value == current.value:
            return current
        revision = self._data.revision + 1
        kv = KeyValue(key, new_value, revision, current.create_revision)
        self._data.apply(WatchEvent("MODIFIED", revision, kv, prev=current))
        return kv

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        current = await self.get(key)
        if expected_revision and current.mod_revision != expected_revision:
            raise errors.Conflict.stale(
                key, current_revision=current.mod_revision, expected_revision=expected_revision
            )
        revision = self._data.revision + 1
        kv = KeyValue(key, current.value, revision, current.create_revision)
        self._data.apply(WatchEvent("DELETED", revision, kv, prev=current))
        return kv

    async def compact(self, revision: int) -> None:
        """Forget the history before `revision`, as etcd's compaction does: reads before
        it and watches from before `revision - 1` raise Expired from now on."""
        if revision > self._data.revision:
            raise errors.TooLargeRevision(
                f"cannot compact at {revision}: the store is at {self._data.revision}",
                revision=revision,
                current_revision=self._data.revision,
            )
        if revision <= self._compacted:
            raise errors.Expired(
                f"revision {revision} has been compacted (at {self._compacted})",
                revision=revision,
                compacted_revision=self._compacted,
            )
        self._compacted = revision
        self._data.forget_before(revision)

    # -- watch ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watch(
        self, prefix: str, *, after_revision: int, progress_interval: float | None = None
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        """See `Store.watch`."""
        data = self._data
        if after_revision > data.revision:
            await data.wait_for(after_revision, within=self._future_wait)
        watcher = data.subscribe(
            prefix,
            after_revision=after_revision,
            capacity=self._watcher_queue_size,
            progress_interval=progress_interval,
        )
        async with watcher:
            yield watcher
