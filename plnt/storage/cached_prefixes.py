"""The in-memory state of one cached prefix, and the watchers fed from it.

Shared by the watch cache (`cache.CachedStore`, one `CachedPrefix` per cached prefix, fed
by etcd's watch) and the in-memory store (`memory.MemoryStore`, one for the whole key
space, fed by its own writes).

`CachedPrefix` holds the current values (a dict for O(1) gets plus a sorted key
list for ordered, bisected lists), the revision it has applied, a bounded ring
of recent events, and the watchers to fan events out to. Everything here is
synchronous: an event is applied, recorded and handed to every watcher without
an `await`, so readers always see a state that is consistent at `revision`.

`CacheWatcher` is one client watch: a bounded queue of live events filled by
the cache. Events are queued the moment they are applied; the watchers' tasks are
woken in rounds paced by `fanout_pacing.WakePacer` (at once when the server is idle,
every few milliseconds under load, so one wake-up carries several events). A
watcher whose queue is full when an event arrives is *terminated*:
it keeps what it had queued (a gap-free prefix of the stream), then its iterator
ends, and the client resumes from the last revision it saw. A slow client
therefore never blocks the cache or other watchers.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import heapq
import itertools
from collections.abc import Mapping, Sequence
from types import TracebackType

from plnt.storage import continuation, errors
from plnt.storage.fanout_pacing import WakePacer
from plnt.storage.interface import KeyValue, ListResult, WatchEvent

_tiebreak = itertools.count()


class CacheWatcher:
    """An async iterator of events for one watch served from memory."""

    __slots__ = (
        "_after",
        "_backlog",
        "_capacity",
        "_ended",
        "_owner",
        "_progress_interval",
        "_queue",
        "_wakeup",
        "overflowed",
        "prefix",
    )

    def __init__(
        self,
        owner: CachedPrefix,
        prefix: str,
        *,
        after_revision: int,
        capacity: int,
        progress_interval: float | None,
        backlog: list[WatchEvent],
    ) -> None:
        self._owner = owner
        self.prefix = prefix
        self._after = after_revision
        self._capacity = capacity
        self._progress_interval = progress_interval
        self._backlog = collections.deque(backlog)
        self._queue: collections.deque[WatchEvent] = collections.deque()
        self._wakeup = asyncio.Event()
        self._ended = False
        self.overflowed = False

    def push(self, event: WatchEvent) -> None:
        """Queue a live event (its task is woken by the owner's next round); terminate
        the watcher instead of growing past capacity."""
        if self._ended:
            return
        if len(self._queue) >= self._capacity:
            self.overflowed = True
            self.end()
            return
        self._queue.append(event)

    def wake(self) -> None:
        """Wake the task if events are queued for it (the owner's wake-up round)."""
        if self._queue:
            self._wakeup.set()

    def end(self) -> None:
        """Stop after the events already queued."""
        self._ended = True
        self._wakeup.set()
        self._owner.watchers.discard(self)

    def pending(self) -> int:
        """Events the next `__anext__` calls return without waiting (lets callers batch)."""
        return len(self._backlog) + len(self._queue)

    def take_ready(self) -> list[WatchEvent]:
        """The events `pending` counts, in order, removed (what `__anext__` would return)."""
        events = [*self._backlog, *self._queue]
        self._backlog.clear()
        self._queue.clear()
        return events

    def __aiter__(self) -> CacheWatcher:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            if self._backlog:
                return self._backlog.popleft()
            if self._queue:
                return self._queue.popleft()
            if self._ended:
                raise StopAsyncIteration
            self._wakeup.clear()
            if self._progress_interval is None:
                await self._wakeup.wait()
                continue
            try:
                async with asyncio.timeout(self._progress_interval):
                    await self._wakeup.wait()
            except TimeoutError:
                # Nothing queued means every event up to the cache's revision was delivered.
                if not self._queue and not self._ended:
                    self._after = max(self._after, self._owner.revision)
                    return WatchEvent("PROGRESS", self._after)

    async def __aenter__(self) -> CacheWatcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end()


class CachedPrefix:
    """Current values, recent history and watchers for one key prefix."""

    def __init__(self, prefix: str, *, history_size: int) -> None:
        self.prefix = prefix
        self.items: dict[str, KeyValue] = {}
        self.keys: list[str] = []
        self.revision = 0
        self.history: collections.deque[WatchEvent] = collections.deque(maxlen=history_size)
        self.history_start = 0
        """Watches with `after_revision` >= this are served from `history`."""
        self.watchers: set[CacheWatcher] = set()
        self.write_floor = 0
        """The newest revision written under this prefix through the owning store."""
        self.ready = False
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self.pacer = WakePacer()
        self._round: asyncio.Handle | None = None
        """The wake-up round scheduled, or running until its cost is measured."""
        self._unwoken = False
        """Events were queued since the last round woke the watchers."""

    def get(self, key: str) -> KeyValue:
        """The current value of `key`; KeyNotFound when there is none."""
        kv = self.items.get(key)
        if kv is None:
            raise errors.KeyNotFound(f"key {key!r} not found", key=key)
        return kv

    def load(self, items: list[KeyValue], revision: int) -> None:
        """Replace the state with a full list read at `revision`; history restarts there."""
        self.items = {kv.key: kv for kv in items}
        self.keys = sorted(self.items)
        self.history.clear()
        self.history_start = revision
        self.revision = 0
        self.advance(revision)
        self.ready = True

    def apply(self, event: WatchEvent) -> None:
        """Apply one change event, record it, fan it out, and advance the revision."""
        kv = event.kv
        assert kv is not None
        key = kv.key
        items = self.items
        if event.type == "DELETED":
            if items.pop(key, None) is not None:
                del self.keys[bisect.bisect_left(self.keys, key)]
        else:
            if key not in items:
                bisect.insort(self.keys, key)
            items[key] = kv
        history = self.history
        if len(history) == history.maxlen:
            self.history_start = history[0].revision
        history.append(event)
        pushed = False
        for watcher in tuple(self.watchers):
            if key.startswith(watcher.prefix):
                watcher.push(event)
                pushed = True
        if pushed:
            self._unwoken = True
            if self._round is None:
                self._schedule_round()
        self.advance(event.revision)

    def _schedule_round(self) -> None:
        """Wake the watchers now, or schedule the round the pacer allows."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # applied outside a loop (no task can be waiting): wake now
            self._unwoken = False
            for watcher in tuple(self.watchers):
                watcher.wake()
            return
        delay = self.pacer.delay(loop.time())
        if delay <= 0:
            self._wake_round()
        else:
            self._round = loop.call_later(delay, self._wake_round)

    def _wake_round(self) -> None:
        """Wake every watcher with queued events, then time their steps for the pacer.

        Events applied while the round runs wait for the next one, which is
        scheduled once this round's cost is known.
        """
        loop = asyncio.get_running_loop()
        self._unwoken = False
        for watcher in tuple(self.watchers):
            watcher.wake()
        # Queued behind the woken tasks' steps, so it runs once they have all written.
        self._round = loop.call_soon(self._round_done, loop.time())

    def _round_done(self, start: float) -> None:
        self._round = None
        self.pacer.finished(start, asyncio.get_running_loop().time())
        if self._unwoken:
            self._schedule_round()

    def advance(self, revision: int) -> None:
        """Note that everything up to `revision` is applied; wake readers waiting for it."""
        if revision > self.revision:
            self.revision = revision
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.revision:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(None)

    async def wait_for(self, revision: int, *, within: float) -> bool:
        """Wait (at most `within` seconds) until `revision` is applied; False on timeout."""
        if self.revision >= revision:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (revision, next(_tiebreak), future))
        try:
            async with asyncio.timeout(within):
                await future
        except TimeoutError:
            return False
        finally:
            future.cancel()
        return True

    def subscribe(
        self,
        prefix: str,
        *,
        after_revision: int,
        capacity: int,
        progress_interval: float | None,
    ) -> CacheWatcher:
        """A watcher primed with the history after `after_revision`, then fed live.

        Priming and registering happen without an await, so no event can fall between
        them. Raises what a watch raises on entry: TooLargeRevision for a revision not
        applied yet (the caller has waited for it as long as it would), Expired for one
        older than the history (or any while not ready).
        """
        if after_revision > self.revision:
            raise errors.TooLargeRevision(
                f"revision {after_revision} is newer than the cache's {self.revision}",
                revision=after_revision,
                current_revision=self.revision,
            )
        if after_revision < self.history_start or not self.ready:
            raise errors.Expired(
                f"revision {after_revision} is too old: the cache holds history"
                f" after {self.history_start}",
                revision=after_revision,
                compacted_revision=self.history_start,
            )
        backlog: list[WatchEvent] = []
        for event in reversed(self.history):
            if event.revision <= after_revision:
                break
            kv = event.kv
            if kv is not None and kv.key.startswith(prefix):
                backlog.append(event)
        backlog.reverse()
        watcher = CacheWatcher(
            self,
            prefix,
            after_revision=after_revision,
            capacity=capacity,
            progress_interval=progress_interval,
            backlog=backlog,
        )
        self.watchers.add(watcher)
        return watcher

    def forget_before(self, revision: int) -> None:
        """Drop the history before `revision` (a compaction at `revision`): watches may
        start after `revision - 1` at the earliest."""
        history = self.history
        while history and history[0].revision < revision:
            history.popleft()
        self.history_start = max(self.history_start, revision - 1)

    def reset(self) -> None:
        """Forget the state (before a relist): end every watcher, mark not ready."""
        self.ready = False
        if self._round is not None:
            self._round.cancel()
            self._round = None
        for watcher in tuple(self.watchers):
            watcher.end()


def page(
    keys: Sequence[str],
    items: Mapping[str, KeyValue],
    prefix: str,
    *,
    start: str,
    limit: int,
    revision: int,
) -> ListResult:
    """One page of a list read at `revision` from sorted `keys` and their `items`: the
    keys under `prefix` from `start` on, at most `limit` (0: all), with the continue token
    of the next page in the etcd store's format."""
    low = bisect.bisect_left(keys, start)
    end = continuation.prefix_end(prefix)
    high = bisect.bisect_left(keys, end) if end else len(keys)
    stop = min(high, low + limit) if limit else high
    found = [items[key] for key in keys[low:stop]]
    token = None
    if stop < high and found:
        token = continuation.encode(
            revision=revision, start=continuation.next_start(found[-1].key[len(prefix) :])
        )
    return ListResult(found, revision, token, (high - stop) if limit else None)
