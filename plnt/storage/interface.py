"""The storage protocol every store implements (etcd, the watch cache wrapping it, memory).

Values are opaque bytes; a value's `mod_revision` is the resourceVersion the API
reports, so stored bytes never carry their own revision.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

EventType = Literal["ADDED", "MODIFIED", "DELETED", "PROGRESS"]


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key at one revision."""

    key: str
    value: bytes
    mod_revision: int
    create_revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    """A page of keys read at one revision.

    `continue_token` is set when more keys remain; passing it back reads the
    next page at the same `revision`.
    """

    items: list[KeyValue]
    revision: int
    continue_token: str | None = None
    remaining: int | None = None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A change under a watched prefix.

    For DELETED, `kv.value` is the last value before the delete and `revision`
    is the delete's revision. PROGRESS carries no kv: it says the store has seen
    everything up to `revision` (the API turns it into a BOOKMARK).
    """

    type: EventType
    revision: int
    kv: KeyValue | None = None
    prev: KeyValue | None = None
    """For MODIFIED and DELETED: the value before this change, when the store knows it.

    Selector-filtered watches need it to turn "stopped matching" into DELETED.
    """


Mutate = Callable[[KeyValue], bytes | None]
"""Pure function from the current value to the new one; None means "no change".

It may raise any exception to abort the update; the exception propagates unchanged.
"""


@runtime_checkable
class Buffered(Protocol):
    """A watch iterator that can say how many events it holds ready.

    The watch cache's iterators are; etcd streams are not. A consumer may use it to
    batch what is already there into one write instead of one write per event.
    """

    def pending(self) -> int:
        """Events available without waiting."""
        ...

    def take_ready(self) -> list[WatchEvent]:
        """Every event available without waiting, in order, taken from the iterator.

        Lets a consumer that fans one event out to many watchers handle a batch
        without one `await` per event.
        """
        ...


class Store(Protocol):
    """Keys, bytes and revisions; see `plnt.storage.errors` for failures."""

    async def create(self, key: str, value: bytes) -> KeyValue:
        """Write `key` only if it does not exist (KeyExists otherwise)."""
        ...

    async def get(self, key: str, *, consistent: bool = True) -> KeyValue:
        """Read the value of `key` (KeyNotFound otherwise).

        `consistent` (the API's resourceVersion ""): the read reflects every write
        etcd acknowledged before it started, through any client or API server
        replica. `consistent=False` (resourceVersion "0") accepts any recent state
        the store holds; it still reads this store's own writes.
        """
        ...

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        revision: int = 0,
        consistent: bool = True,
    ) -> ListResult:
        """Read keys under `prefix` in key order.

        `limit` 0 means no limit. `revision` 0 means the latest (as `get` defines
        it with `consistent`); a positive value reads at exactly that revision
        (Expired if compacted). A continue token pins both the revision and the
        start key of the next page.
        """
        ...

    async def guaranteed_update(
        self, key: str, mutate: Mutate, *, expected_revision: int = 0
    ) -> KeyValue:
        """Compare-and-swap loop: read, `mutate`, write if unchanged meanwhile.

        With `expected_revision` > 0 the first read must be at that mod revision
        (Conflict otherwise, no retry). When `mutate` returns None or the same
        bytes, nothing is written and the current KeyValue is returned.
        """
        ...

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        """Delete `key`, returning its last value with `mod_revision` = the delete revision.

        With `expected_revision` > 0 the key must still be at that mod revision
        (Conflict otherwise).
        """
        ...

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        progress_interval: float | None = None,
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        """Stream every change under `prefix` with revision > `after_revision`, without gaps.

        Raises Expired (on entry or from the iterator) when `after_revision` has
        been compacted, TooLargeRevision (on entry) when a store cannot reach it.
        With `progress_interval`, an idle stream yields PROGRESS events at about
        that period (see each store for what bounds the period).

        The iterator may end (a store may drop a watcher that falls behind) or
        raise Unavailable (etcd lost); callers resume by watching again from the
        last revision they saw, which never loses or repeats an event.
        """
        ...

    async def current_revision(self) -> int:
        """etcd's current revision (a linearizable read: one round trip)."""
        ...
