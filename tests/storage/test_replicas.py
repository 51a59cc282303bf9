"""Two watch caches on one etcd, as two API server replicas run: consistent reads.

A write acknowledged through one store is seen by the very next consistent GET and
LIST on the other (no retry loop: the first read must see it), because the other
store asks etcd for its revision and waits for its cache to reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plnt.storage import errors
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import WatchEvent
from tests.support.etcd import running_etcd
from tests.support.stores import next_changes


class HeldWatchStore(EtcdStore):
    """An etcd store whose watches hold every event back while `flowing` is clear.

    It stands in for a replica whose cache lags; `asked` is set whenever someone
    reads etcd's current revision (what a consistent read does first).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.asked = asyncio.Event()

    async def current_revision(self) -> int:
        revision = await super().current_revision()
        self.asked.set()
        return revision

    def watch(self, prefix: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return self._held_watch(prefix, **kwargs)

    @contextlib.asynccontextmanager
    async def _held_watch(self, prefix: str, **kwargs: Any) -> AsyncIterator[Any]:
        async with super().watch(prefix, **kwargs) as events:
            yield _Held(events, self.flowing)


class _Held:
    def __init__(self, events: Any, flowing: asyncio.Event) -> None:
        self._events = events
        self._flowing = flowing

    async def request_progress(self) -> None:
        await self._events.request_progress()

    def __aiter__(self) -> _Held:
        return self

    async def __anext__(self) -> WatchEvent:
        event: WatchEvent = await anext(self._events)
        await self._flowing.wait()
        return event


@pytest.fixture
async def replicas(
    etcd_endpoint: str, prefix: str
) -> AsyncIterator[tuple[CachedStore, CachedStore, HeldWatchStore]]:
    """Stores A and B, each with its own etcd client and cache; B's watch can be held."""
    async with (
        EtcdStore(etcd_endpoint, key_prefix="/registry") as etcd_a,
        HeldWatchStore(etcd_endpoint, key_prefix="/registry") as etcd_b,
        CachedStore(etcd_a, prefixes=[prefix]) as a,
        CachedStore(etcd_b, prefixes=[prefix]) as b,
    ):
        yield a, b, etcd_b


async def test_creates_updates_and_deletes_on_one_store_are_read_at_once_on_the_other(
    replicas: tuple[CachedStore, CachedStore, HeldWatchStore], prefix: str
) -> None:
    a, b, _ = replicas
    for i in range(20):
        key = f"{prefix}k{i}"
        created = await a.create(key, b"v")
        assert await b.get(key) == created
        assert created in (await b.list(prefix)).items
        updated = await a.guaranteed_update(key, lambda kv: b"w")
        assert await b.get(key) == updated
        listed = await b.list(prefix, limit=100)
        assert listed.revision >= updated.mod_revision
        assert updated in listed.items
        deleted = await a.delete(key)
        with pytest.raises(errors.KeyNotFound):
            await b.get(key)
        assert key not in {kv.key for kv in (await b.list(prefix)).items}
        assert (await b.list(prefix)).revision >= deleted.mod_revision
    assert b.stats.fallbacks == 0
    assert b.stats.from_cache >= 100


async def test_resource_version_0_reads_on_the_other_store_never_fail(
    replicas: tuple[CachedStore, CachedStore, HeldWatchStore], prefix: str
) -> None:
    a, b, _ = replicas
    for i in range(20):
        created = await a.create(f"{prefix}k{i}", b"v")
        with contextlib.suppress(errors.KeyNotFound):  # it may lag: that is allowed
            assert await b.get(created.key, consistent=False) == created
        page = await b.list(prefix, consistent=False)
        assert all(kv.key.startswith(prefix) for kv in page.items)


async def test_a_consistent_read_waits_for_a_lagging_cache_instead_of_answering_stale(
    replicas: tuple[CachedStore, CachedStore, HeldWatchStore], prefix: str
) -> None:
    a, b, etcd_b = replicas
    etcd_b.flowing.clear()
    etcd_b.asked.clear()
    created = await a.create(prefix + "x", b"v")
    with pytest.raises(errors.KeyNotFound):  # B's cache has not seen the write
        await b.get(prefix + "x", consistent=False)
    async with asyncio.timeout(10):
        read = asyncio.create_task(b.get(prefix + "x"))
        await etcd_b.asked.wait()
        assert not read.done()
        etcd_b.flowing.set()
        assert await read == created
    assert b.stats.fallbacks == 0


async def test_a_consistent_read_goes_to_etcd_when_the_cache_does_not_catch_up_in_time(
    etcd_endpoint: str, prefix: str
) -> None:
    async with (
        EtcdStore(etcd_endpoint, key_prefix="/registry") as etcd_a,
        HeldWatchStore(etcd_endpoint, key_prefix="/registry") as etcd_b,
        CachedStore(etcd_b, prefixes=[prefix], sync_timeout=0.2) as b,
    ):
        etcd_b.flowing.clear()
        created = await etcd_a.create(prefix + "x", b"v")
        assert await b.get(prefix + "x") == created
        assert (await b.list(prefix)).items == [created]
        assert b.stats.fallbacks == 2
        etcd_b.flowing.set()


async def test_a_watch_from_a_write_on_the_other_store_delivers_what_follows(
    replicas: tuple[CachedStore, CachedStore, HeldWatchStore], prefix: str
) -> None:
    a, b, _ = replicas
    first = await a.create(prefix + "a", b"v")
    async with b.watch(prefix, after_revision=first.mod_revision) as events:
        second = await a.create(prefix + "b", b"v")
        updated = await a.guaranteed_update(prefix + "a", lambda kv: b"w")
        got = await next_changes(events, 2)
    assert [(e.type, e.kv) for e in got] == [("ADDED", second), ("MODIFIED", updated)]


async def test_writes_outside_the_cached_prefixes_do_not_make_a_consistent_read_wait(
    tmp_path: Path,
) -> None:
    """One watch covers the whole key space, so an idle prefix still moves with etcd.

    etcd's periodic progress notifications are slowed to 30 s here, so only that
    watch (not a notification) can bring the cache to etcd's revision in time.
    """
    async with (
        running_etcd(tmp_path, progress_notify_interval="30s") as etcd,
        EtcdStore(etcd.endpoint, key_prefix="/registry") as etcd_a,
        EtcdStore(etcd.endpoint, key_prefix="/registry") as etcd_b,
        CachedStore(etcd_b, prefixes=["/cached/"]) as b,
    ):
        kept = await etcd_a.create("/cached/kept", b"v")
        for i in range(10):
            written = await etcd_a.create(f"/elsewhere/k{i}", b"v")
            assert await b.get("/cached/kept") == kept
            assert (await b.list("/cached/")).revision >= written.mod_revision
        assert b.stats.fallbacks == 0


class GatedRevisionStore(EtcdStore):
    """An etcd store that counts revision reads and can hold the next one until released."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: list[int] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.holding = asyncio.Event()

    async def current_revision(self) -> int:
        if not self.hold.is_set():
            self.holding.set()
            await self.hold.wait()
        revision = await super().current_revision()
        self.reads.append(revision)
        return revision


async def test_concurrent_consistent_reads_share_one_revision_read_started_after_they_began(
    etcd_endpoint: str, prefix: str
) -> None:
    async with (
        EtcdStore(etcd_endpoint, key_prefix="/registry") as etcd_a,
        GatedRevisionStore(etcd_endpoint, key_prefix="/registry") as etcd_b,
        CachedStore(etcd_a, prefixes=[prefix]) as a,
        CachedStore(etcd_b, prefixes=[prefix]) as b,
    ):
        await a.create(f"{prefix}early", b"v")
        etcd_b.hold.clear()
        first = asyncio.create_task(b.get(f"{prefix}early"))
        await asyncio.wait_for(etcd_b.holding.wait(), 10)  # its revision read is in flight
        written = await a.create(f"{prefix}late", b"w")  # acknowledged after that read began
        later = [asyncio.create_task(b.get(f"{prefix}late")) for _ in range(9)]
        etcd_b.hold.set()
        assert (await first).key == f"{prefix}early"
        assert [kv.mod_revision for kv in await asyncio.gather(*later)] == [
            written.mod_revision
        ] * 9
        assert len(etcd_b.reads) == 2  # one for the first read, one shared by the nine
        assert etcd_b.reads[1] >= written.mod_revision
