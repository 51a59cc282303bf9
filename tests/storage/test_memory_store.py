"""What only the in-memory store does; the contract itself is `test_store_conformance`."""

from __future__ import annotations

import asyncio

import pytest

from plnt.storage import errors
from plnt.storage.interface import Buffered
from plnt.storage.memory import MemoryStore
from tests.support.stores import next_changes


async def test_a_watch_from_a_revision_not_written_yet_waits_for_it_then_starts_after_it() -> None:
    async with MemoryStore() as store:
        start = await store.current_revision()

        async def write() -> list[object]:
            await asyncio.sleep(0)  # let the watch begin waiting first
            return [await store.create(f"/p/{name}", b"v") for name in ("a", "b")]

        writing = asyncio.create_task(write())
        async with store.watch("/p/", after_revision=start + 1) as events:
            got = await next_changes(events, 1)
        written = await writing
    assert [(e.type, e.kv) for e in got] == [("ADDED", written[1])]


async def test_a_watch_from_a_revision_nobody_writes_in_time_is_too_large() -> None:
    async with MemoryStore(future_wait=0.05) as store:
        ahead = await store.current_revision() + 5
        with pytest.raises(errors.TooLargeRevision):
            async with store.watch("/p/", after_revision=ahead):
                pass


async def test_a_watcher_that_falls_too_far_behind_keeps_what_it_holds_then_ends() -> None:
    async with (
        MemoryStore(watcher_queue_size=2) as store,
        store.watch("/p/", after_revision=1) as events,
    ):
        written = [await store.create(f"/p/k{i}", b"v") for i in range(3)]
        assert isinstance(events, Buffered)
        async with asyncio.timeout(10):
            got = [event async for event in events]
    assert [e.kv for e in got] == written[:2]


async def test_closing_the_store_ends_its_watches() -> None:
    store = MemoryStore()
    async with store.watch("/p/", after_revision=1) as events:
        await store.close()
        async with asyncio.timeout(10):
            assert [event async for event in events] == []
