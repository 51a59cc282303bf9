"""Paced wake-ups of a cached prefix's watchers: nothing lost, reordered or held when idle.

The cache queues every event for its watchers at once and wakes their tasks in rounds
(`plnt.storage.fanout_pacing`). These tests drive `CachedPrefix` directly with events,
on the test's event loop, and check what each watcher can read and when it is woken,
by state (a round pending or not), never by elapsed time.
"""

from __future__ import annotations

import asyncio

import pytest

from plnt.storage.cached_prefixes import CachedPrefix, CacheWatcher
from plnt.storage.fanout_pacing import WakePacer
from plnt.storage.interface import KeyValue, WatchEvent

PREFIX = "/plnt.work/things/"


def added(revision: int, name: str = "") -> WatchEvent:
    key = f"{PREFIX}{name or f'k{revision}'}"
    return WatchEvent("ADDED", revision, KeyValue(key, b"v", revision, revision))


def loaded(revision: int = 1) -> CachedPrefix:
    prefix = CachedPrefix(PREFIX, history_size=100)
    prefix.load([], revision)
    return prefix


async def take(watcher: CacheWatcher, count: int) -> list[WatchEvent]:
    async with asyncio.timeout(10):
        return [await anext(watcher) for _ in range(count)]


def test_an_idle_pacer_lets_a_round_start_at_once() -> None:
    assert WakePacer().delay(now=123.0) == 0.0


def test_after_a_round_the_loop_gets_as_long_as_the_round_took_up_to_the_cap() -> None:
    pacer = WakePacer(max_gap=0.025)
    pacer.finished(start=10.0, end=10.004)
    assert pacer.delay(now=10.004) == pytest.approx(0.004)
    assert pacer.delay(now=10.009) == 0.0
    pacer.finished(start=20.0, end=20.100)  # a round far costlier than the cap
    assert pacer.delay(now=20.100) == pytest.approx(0.025)


async def test_an_event_on_an_idle_prefix_wakes_its_watcher_at_once() -> None:
    prefix = loaded()
    watcher = prefix.subscribe(PREFIX, after_revision=1, capacity=10, progress_interval=None)
    prefix.apply(added(2))
    assert watcher._wakeup.is_set()  # woken in the same step, not at a later round
    assert [e.revision for e in await take(watcher, 1)] == [2]


async def test_events_applied_while_paced_wait_for_one_round_and_arrive_together() -> None:
    prefix = loaded()
    watcher = prefix.subscribe(PREFIX, after_revision=1, capacity=10, progress_interval=None)
    loop = asyncio.get_running_loop()
    prefix.pacer.next_start = loop.time() + 0.05  # as if a costly round just ended
    for revision in range(2, 7):
        prefix.apply(added(revision))
    assert not watcher._wakeup.is_set()
    assert watcher.pending() == 5  # queued at once, in order, for the round to wake
    got = await take(watcher, 5)
    assert [e.revision for e in got] == [2, 3, 4, 5, 6]


async def test_events_applied_during_a_round_are_delivered_by_the_next() -> None:
    prefix = loaded()
    first = prefix.subscribe(PREFIX, after_revision=1, capacity=100, progress_interval=None)
    second = prefix.subscribe(PREFIX, after_revision=1, capacity=100, progress_interval=None)
    seen: dict[str, list[int]] = {"first": [], "second": []}

    async def read(name: str, watcher: CacheWatcher, count: int) -> None:
        async with asyncio.timeout(10):
            while len(seen[name]) < count:
                seen[name].append((await anext(watcher)).revision)
                if name == "first" and len(seen[name]) == 1:
                    # Applied while the round that woke us is still running: the
                    # other watcher's task may already have run, so only the next
                    # round can deliver these to it.
                    for revision in range(3, 8):
                        prefix.apply(added(revision))

    # "second" runs first, so it is already waiting again when "first" applies more.
    readers = [
        asyncio.create_task(read("second", second, 6)),
        asyncio.create_task(read("first", first, 6)),
    ]
    prefix.apply(added(2))
    await asyncio.gather(*readers)
    assert seen == {"first": [2, 3, 4, 5, 6, 7], "second": [2, 3, 4, 5, 6, 7]}


async def test_a_watcher_of_a_narrower_prefix_is_not_woken_for_others_events() -> None:
    prefix = loaded()
    narrow = prefix.subscribe(
        PREFIX + "ns-a/", after_revision=1, capacity=10, progress_interval=None
    )
    prefix.apply(added(2, "ns-b/x"))
    assert narrow.pending() == 0 and not narrow._wakeup.is_set()
    prefix.apply(added(3, "ns-a/y"))
    assert [e.revision for e in await take(narrow, 1)] == [3]


async def test_a_full_queue_still_ends_the_watcher_at_once_while_paced() -> None:
    prefix = loaded()
    watcher = prefix.subscribe(PREFIX, after_revision=1, capacity=2, progress_interval=None)
    prefix.pacer.next_start = asyncio.get_running_loop().time() + 60  # no round for a minute
    for revision in range(2, 6):
        prefix.apply(added(revision))
    assert watcher.overflowed
    async with asyncio.timeout(10):
        got = [event.revision async for event in watcher]
    assert got == [2, 3]  # the gap-free prefix it had queued, then the end


async def test_progress_is_not_reported_past_events_still_waiting_for_their_round() -> None:
    prefix = loaded()
    watcher = prefix.subscribe(PREFIX, after_revision=1, capacity=10, progress_interval=0.01)
    loop = asyncio.get_running_loop()
    prefix.pacer.next_start = loop.time() + 60  # no round for a minute
    reader = asyncio.create_task(anext(watcher))
    loop.call_soon(prefix.apply, added(2))  # runs once the reader waits, progress timer set
    async with asyncio.timeout(10):
        event = await reader  # its progress timer fires first; the event is queued
    assert (event.type, event.revision) == ("ADDED", 2)


async def test_a_reset_cancels_the_pending_round_and_ends_the_watchers() -> None:
    prefix = loaded()
    watcher = prefix.subscribe(PREFIX, after_revision=1, capacity=10, progress_interval=None)
    prefix.pacer.next_start = asyncio.get_running_loop().time() + 60
    prefix.apply(added(2))
    prefix.reset()
    async with asyncio.timeout(10):
        assert [event.revision async for event in watcher] == [2]
    assert prefix._round is None


async def test_take_ready_returns_the_backlog_then_the_queue_and_leaves_nothing() -> None:
    prefix = loaded()
    for revision in range(2, 5):
        prefix.apply(added(revision))
    watcher = prefix.subscribe(PREFIX, after_revision=2, capacity=10, progress_interval=None)
    prefix.apply(added(5))
    assert watcher.pending() == 3
    assert [e.revision for e in watcher.take_ready()] == [3, 4, 5]
    assert watcher.pending() == 0 and watcher.take_ready() == []
    prefix.apply(added(6))
    assert [e.revision for e in await take(watcher, 1)] == [6]
