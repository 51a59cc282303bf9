"""A bounded queue between a producer that must never wait and one slow async reader.

Two readers of the API server need it: a watcher of a run's invocation log
(`workflowruns.traffic.Follower`, ended when it falls behind, as kube-apiserver ends a
watcher whose channel stays full) and a sibling worker reading a stream of the server's
private channel (`peers`, which drops the item and counts it instead). What differs is
only what a full queue means, so the queue itself is written once: `push` never awaits
and refuses (returns False) rather than grow past `capacity`; `take` answers everything
queued, oldest first, waiting for an item when none is; once `end`ed, `take` drains what
is queued and then answers `[]`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Backlog(Generic[T]):
    """Items pushed and not yet taken, never more than `capacity`."""

    __slots__ = ("_items", "_wakeup", "capacity", "ended")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: deque[T] = deque()
        self._wakeup = asyncio.Event()
        self.ended = False

    def push(self, item: T) -> bool:
        """Queue `item`; False (not queued) when `capacity` items are queued already."""
        if len(self._items) >= self.capacity:
            return False
        self._items.append(item)
        self._wakeup.set()
        return True

    def end(self) -> None:
        """Wake the reader for good: `take` drains what is queued, then answers `[]`."""
        self.ended = True
        self._wakeup.set()

    async def take(self) -> list[T]:
        while not self._items and not self.ended:
            self._wakeup.clear()
            await self._wakeup.wait()
        taken = list(self._items)
        self._items.clear()
        return taken
