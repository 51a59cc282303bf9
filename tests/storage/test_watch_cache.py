"""What the watch cache adds over the etcd store: fan-out, read-your-writes, slow watchers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plnt.storage import errors
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import KeyValue
from tests.support.etcd import running_etcd
from tests.support.stores import next_changes


@pytest.fixture
async def cache(etcd_store: EtcdStore, prefix: str) -> AsyncIterator[CachedStore]:
    async with CachedStore(
        etcd_store, prefixes=[prefix], history_size=16, watcher_queue_size=4, future_wait=2.0
    ) as cached:
        yield cached


async def test_the_cache_is_ready_once_started_and_serves_what_existed_before(
    etcd_store: EtcdStore, prefix: str
) -> None:
    existing = await etcd_store.create(prefix + "old", b"v")
    async with CachedStore(etcd_store, prefixes=[prefix]) as cached:
        assert cached.ready
        assert await cached.get(prefix + "old") == existing
    assert not cached.ready


async def test_many_watchers_each_get_every_event_in_order(
    etcd_store: EtcdStore, prefix: str
) -> None:
    async with CachedStore(etcd_store, prefixes=[prefix], watcher_queue_size=100) as cached:
        start = await cached.current_revision()
        async with contextlib.AsyncExitStack() as stack:
            streams = [
                await stack.enter_async_context(cached.watch(prefix, after_revision=start))
                for _ in range(50)
            ]
            written = [await cached.create(f"{prefix}k{i}", b"v") for i in range(20)]
            results = await asyncio.gather(*(next_changes(s, 20) for s in streams))
    for got in results:
        assert [e.kv for e in got] == written


async def test_reads_after_a_write_through_the_cache_see_that_write(
    cache: CachedStore, prefix: str
) -> None:
    for i in range(50):
        key = f"{prefix}k{i}"
        created = await cache.create(key, b"v")
        assert await cache.get(key) == created
        updated = await cache.guaranteed_update(key, lambda kv: b"w")
        assert await cache.get(key) == updated
        listed = await cache.list(prefix, limit=1000)
        assert listed.revision >= updated.mod_revision
        assert updated in listed.items
        await cache.delete(key)
        with pytest.raises(errors.KeyNotFound):
            await cache.get(key)


async def test_a_slow_watcher_is_ended_without_blocking_the_others(
    cache: CachedStore, prefix: str
) -> None:
    start = await cache.current_revision()
    async with (
        cache.watch(prefix, after_revision=start) as slow,
        cache.watch(prefix, after_revision=start) as fast,
    ):
        written = []
        fast_seen = []
        for i in range(12):
            written.append(await cache.create(f"{prefix}k{i}", b"v"))
            fast_seen += await next_changes(fast, 1)
        slow_seen = [event async for event in slow]
    assert [e.kv for e in fast_seen] == written
    assert [e.kv for e in slow_seen] == written[:4]


async def test_watch_older_than_the_cache_history_raises_expired(
    cache: CachedStore, prefix: str
) -> None:
    first = await cache.create(prefix + "a", b"0")

    def bump(kv: KeyValue) -> bytes:
        return str(int(kv.value) + 1).encode()

    for _ in range(20):
        await cache.guaranteed_update(prefix + "a", bump)
    with pytest.raises(errors.Expired):
        async with cache.watch(prefix, after_revision=first.mod_revision):
            pass


async def test_watch_from_a_newer_revision_waits_for_the_cache_to_reach_it(
    cache: CachedStore, etcd_store: EtcdStore, prefix: str
) -> None:
    elsewhere = await etcd_store.create(prefix.rstrip("/") + "-elsewhere", b"v")
    async with cache.watch(prefix, after_revision=elsewhere.mod_revision) as events:
        created = await cache.create(prefix + "a", b"v")
        assert [e.kv for e in await next_changes(events, 1)] == [created]


async def test_watch_from_a_revision_far_in_the_future_raises_too_large_revision(
    etcd_store: EtcdStore, prefix: str
) -> None:
    async with CachedStore(etcd_store, prefixes=[prefix], future_wait=0.2) as cached:
        current = await cached.current_revision()
        with pytest.raises(errors.TooLargeRevision):
            async with cached.watch(prefix, after_revision=current + 1000):
                pass


async def test_a_list_started_in_memory_continues_in_memory_when_nothing_changed(
    cache: CachedStore, prefix: str
) -> None:
    written = [await cache.create(f"{prefix}k{i}", b"v") for i in range(5)]
    pages = [await cache.list(prefix, limit=2)]
    while pages[-1].continue_token is not None:
        pages.append(await cache.list(prefix, limit=2, continue_token=pages[-1].continue_token))
    assert [kv for page in pages for kv in page.items] == written
    assert [page.remaining for page in pages] == [3, 1, 0]
    assert len({page.revision for page in pages}) == 1


async def test_keys_outside_the_cached_prefixes_are_served_by_etcd(
    cache: CachedStore, prefix: str
) -> None:
    other = prefix.rstrip("/") + "-other/"
    created = await cache.create(other + "a", b"v")
    assert await cache.get(other + "a") == created
    assert (await cache.list(other)).items == [created]


async def test_the_cache_catches_up_after_etcd_restarts(tmp_path: Path) -> None:
    async with running_etcd(tmp_path) as first:
        ports = {"client_port": first.client_port, "peer_port": first.peer_port}
        store = EtcdStore(first.endpoint)
        await store.start()
        try:
            async with CachedStore(store, prefixes=["/p/"]) as cached:
                before = await cached.create("/p/a", b"v")
                await first.astop()
                async with running_etcd(tmp_path, **ports):
                    after = await cached.create("/p/b", b"v")
                    async with cached.watch("/p/", after_revision=before.mod_revision) as events:
                        assert [e.kv for e in await next_changes(events, 1)] == [after]
                    assert (await cached.list("/p/")).items == [before, after]
        finally:
            await store.close()


async def test_a_mutate_that_refuses_a_stale_guess_runs_again_on_the_value_in_etcd(
    etcd_store: EtcdStore, prefix: str
) -> None:
    """A cached guess one write behind must not turn into the caller's error."""
    stale = await etcd_store.create(prefix + "k", b"old")
    await etcd_store.guaranteed_update(prefix + "k", lambda kv: b"new")
    seen: list[bytes] = []

    def mutate(kv: KeyValue) -> bytes:
        seen.append(kv.value)
        if kv.value == b"old":
            raise ValueError("refused the stale value")
        return b"newer"

    written = await etcd_store.guaranteed_update(prefix + "k", mutate, current=stale)
    assert seen == [b"old", b"new"]
    assert (await etcd_store.get(prefix + "k")).value == written.value == b"newer"


async def test_a_mutate_that_refuses_a_current_guess_raises_without_retrying(
    etcd_store: EtcdStore, prefix: str
) -> None:
    current = await etcd_store.create(prefix + "k", b"v")
    calls: list[bytes] = []

    def refuse(kv: KeyValue) -> bytes:
        calls.append(kv.value)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await etcd_store.guaranteed_update(prefix + "k", refuse, current=current)
    assert calls == [b"v"]
    assert (await etcd_store.get(prefix + "k")).mod_revision == current.mod_revision
