"""`CachedStore`: kube-apiserver's watch cache idea, implementing the same `Store` protocol.

Why: every GET, LIST and WATCH of the API would otherwise be an etcd round trip
(and every WATCH its own etcd stream). The cache keeps, per configured prefix
(e.g. `/plnt.work/workflowruns/`), one etcd watch feeding an in-memory sorted
map of current values and a bounded ring of recent events, and serves:

* `get`: a dict lookup, no etcd round trip;
* `list` at revision 0 (or at exactly the cache's revision, e.g. the next page
  of a list it started): bisected slices of the sorted keys, with continue
  tokens in the etcd store's format. Any other revision, including the next
  page of a list whose revision the cache has moved past, falls through to
  etcd, which serves it exactly or raises Expired;
* `watch` from any revision still in the ring; older raises Expired (kube's
  "too old resource version"); newer than the cache has seen waits up to
  `future_wait` for it (etcd's periodic progress notifications move an idle
  cache forward), then raises TooLargeRevision. One etcd stream serves any
  number of watchers; slow watchers are terminated (see `cached_prefixes`).

Consistency rule (read-your-writes): writes go to etcd. When a write through
this store returns revision R under a cached prefix, later reads of that prefix
first wait (at most `sync_timeout`) until the cache has applied R; if it has
not by then, the read goes to etcd. So `create` then `get` always sees the
object, and lists are snapshots at a single revision. This holds for one
process: with several API server replicas, a read would need the quorum revision
from etcd (one cheap round trip) to see another replica's writes; plnt runs one.

Keys outside every cached prefix, and everything before the initial list has
loaded (`ready` False), go straight to the etcd store. On a compaction that
outruns the cache's own watch, the prefix is relisted and its watchers ended.

Errors: the etcd store's `plnt.storage.errors`, plus Expired / TooLargeRevision
raised on entering a watch.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from plnt.storage import continuation, errors
from plnt.storage.cached_prefixes import CachedPrefix
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import KeyValue, ListResult, Mutate, WatchEvent

log = logging.getLogger(__name__)

_LOAD_PAGE = 5000


class CachedStore:
    """A `Store` serving reads and watches of `prefixes` from memory, writes via `store`."""

    def __init__(
        self,
        store: EtcdStore,
        *,
        prefixes: Sequence[str],
        history_size: int = 10_000,
        watcher_queue_size: int = 1_000,
        sync_timeout: float = 5.0,
        future_wait: float = 3.0,
        start_timeout: float = 30.0,
    ) -> None:
        self._store = store
        self._caches = [CachedPrefix(p, history_size=history_size) for p in prefixes]
        self._watcher_queue_size = watcher_queue_size
        self._sync_timeout = sync_timeout
        self._future_wait = future_wait
        self._start_timeout = start_timeout
        self._tasks: list[asyncio.Task[None]] = []
        self._loaded: dict[str, asyncio.Event] = {}

    @property
    def ready(self) -> bool:
        """True once every prefix has loaded its initial list (and is not relisting)."""
        return bool(self._caches) and all(c.ready for c in self._caches)

    @property
    def store(self) -> EtcdStore:
        return self._store

    async def start(self) -> None:
        """Start one watch loop per prefix and wait until all are loaded (Unavailable if not)."""
        for cache in self._caches:
            self._loaded[cache.prefix] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._run(cache), name=f"cache {cache.prefix}"))
        try:
            async with asyncio.timeout(self._start_timeout):
                for event in self._loaded.values():
                    await event.wait()
        except TimeoutError as exc:
            await self.close()
            raise errors.Unavailable("the watch cache could not load its initial lists") from exc

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for cache in self._caches:
            cache.reset()

    async def __aenter__(self) -> CachedStore:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- reads ----------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue:
        cache = self._fresh_cache_for(key)
        if cache is None or (
            cache.revision < cache.write_floor and not await self._caught_up(cache)
        ):
            return await self._store.get(key)
        kv = cache.items.get(key)
        if kv is None:
            raise errors.KeyNotFound(f"key {key!r} not found", key=key)
        return kv

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        revision: int = 0,
    ) -> ListResult:
        cache = self._fresh_cache_for(prefix)
        if cache is not None and cache.revision < cache.write_floor:
            cache = cache if await self._caught_up(cache) else None
        start = prefix
        if continue_token is not None:
            token_revision, relative_start = continuation.decode(continue_token)
            if revision and revision != token_revision:
                raise errors.InvalidContinue("a continue token cannot be used with a revision")
            revision = token_revision
            start = prefix + relative_start
        if cache is None or (revision and revision != cache.revision):
            return await self._store.list(
                prefix, limit=limit, continue_token=continue_token, revision=revision
            )
        keys = cache.keys
        low = bisect.bisect_left(keys, start)
        end = continuation.prefix_end(prefix)
        high = bisect.bisect_left(keys, end) if end else len(keys)
        stop = min(high, low + limit) if limit else high
        items = cache.items
        page = [items[key] for key in keys[low:stop]]
        token = None
        if stop < high and page:
            token = continuation.encode(
                revision=cache.revision,
                start=continuation.next_start(page[-1].key[len(prefix) :]),
            )
        return ListResult(page, cache.revision, token, (high - stop) if limit else None)

    async def current_revision(self) -> int:
        return await self._store.current_revision()

    # -- writes ---------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        kv = await self._store.create(key, value)
        self._note_write(key, kv.mod_revision)
        return kv

    async def guaranteed_update(
        self, key: str, mutate: Mutate, *, expected_revision: int = 0
    ) -> KeyValue:
        cache = self._fresh_cache_for(key)
        guess = cache.items.get(key) if cache is not None else None
        kv = await self._store.guaranteed_update(
            key, mutate, expected_revision=expected_revision, current=guess
        )
        self._note_write(key, kv.mod_revision)
        return kv

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        kv = await self._store.delete(key, expected_revision=expected_revision)
        self._note_write(key, kv.mod_revision)
        return kv

    async def compact(self, revision: int) -> None:
        await self._store.compact(revision)

    # -- watch ----------------------------------------------------------------------------

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        progress_interval: float | None = None,
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        return self._watch(prefix, after_revision, progress_interval)

    @contextlib.asynccontextmanager
    async def _watch(
        self, prefix: str, after_revision: int, progress_interval: float | None
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        cache = self._fresh_cache_for(prefix)
        if cache is None:
            async with self._store.watch(
                prefix, after_revision=after_revision, progress_interval=progress_interval
            ) as events:
                yield events
            return
        if after_revision > cache.revision and not await cache.wait_for(
            after_revision, within=self._future_wait
        ):
            raise errors.TooLargeRevision(
                f"revision {after_revision} is newer than the cache's {cache.revision}",
                revision=after_revision,
                current_revision=cache.revision,
            )
        if after_revision < cache.history_start or not cache.ready:
            raise errors.Expired(
                f"revision {after_revision} is too old: the cache holds history"
                f" after {cache.history_start}",
                revision=after_revision,
                compacted_revision=cache.history_start,
            )
        watcher = cache.subscribe(
            prefix,
            after_revision=after_revision,
            capacity=self._watcher_queue_size,
            progress_interval=progress_interval,
        )
        async with watcher:
            yield watcher

    # -- internals ------------------------------------------------------------------------

    def _fresh_cache_for(self, key_or_prefix: str) -> CachedPrefix | None:
        for cache in self._caches:
            if cache.ready and key_or_prefix.startswith(cache.prefix):
                return cache
        return None

    async def _caught_up(self, cache: CachedPrefix) -> bool:
        return await cache.wait_for(cache.write_floor, within=self._sync_timeout)

    def _note_write(self, key: str, revision: int) -> None:
        for cache in self._caches:
            if key.startswith(cache.prefix):
                cache.write_floor = max(cache.write_floor, revision)
                return

    async def _run(self, cache: CachedPrefix) -> None:
        """Keep `cache` in sync: list, then watch from the list's revision, forever."""
        backoff = 0.1
        while True:
            try:
                if not cache.ready:
                    await self._load(cache)
                    self._loaded[cache.prefix].set()
                async with self._store.watch(
                    cache.prefix, after_revision=cache.revision, progress_interval=0.0
                ) as events:
                    backoff = 0.1
                    async for event in events:
                        if event.type == "PROGRESS":
                            cache.advance(event.revision)
                        else:
                            cache.apply(event)
            except errors.Expired:
                log.warning("watch cache for %s fell behind compaction; relisting", cache.prefix)
                cache.reset()
            except Exception as exc:  # keep serving: a dead loop would freeze the cache
                log.warning("watch cache for %s lost etcd (%r); retrying", cache.prefix, exc)
                await asyncio.sleep(backoff)  # retry backoff, not synchronisation
                backoff = min(backoff * 2, 5.0)

    async def _load(self, cache: CachedPrefix) -> None:
        items: list[KeyValue] = []
        page = await self._store.list(cache.prefix, limit=_LOAD_PAGE)
        items.extend(page.items)
        while page.continue_token is not None:
            page = await self._store.list(
                cache.prefix, limit=_LOAD_PAGE, continue_token=page.continue_token
            )
            items.extend(page.items)
        cache.load(items, page.revision)
