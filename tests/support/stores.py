"""What the storage tests share: the union of `Store` implementations, and reading a watch.

`next_changes(events, count)` takes the next `count` events that are not PROGRESS
notifications, failing past its deadline, so a test never waits on a watch unbounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import WatchEvent
from plnt.storage.memory import MemoryStore

AnyStore = EtcdStore | CachedStore | MemoryStore


async def next_changes(
    events: AsyncIterator[WatchEvent], count: int, *, within: float = 10.0
) -> list[WatchEvent]:
    """The next `count` non-PROGRESS events, failing the test if they take over `within` s."""
    got: list[WatchEvent] = []
    async with asyncio.timeout(within):
        while len(got) < count:
            event = await anext(events)
            if event.type != "PROGRESS":
                got.append(event)
    return got
