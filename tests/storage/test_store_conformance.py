"""The `Store` contract, run against every implementation (etcd, the cache over it, memory)."""

from __future__ import annotations

import asyncio
import json

import pytest

from plnt.storage import errors
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import KeyValue
from tests.support.stores import AnyStore, next_changes


def _increment(kv: KeyValue) -> bytes:
    return json.dumps({"n": json.loads(kv.value)["n"] + 1}).encode()


# -- create / get ----------------------------------------------------------------------------


async def test_create_then_get_returns_the_value_at_the_create_revision(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")
    assert created.value == b"one"
    assert created.mod_revision == created.create_revision > 0
    assert await store.get(prefix + "a") == created


async def test_create_is_rejected_with_key_exists_when_the_key_is_present(
    store: AnyStore, prefix: str
) -> None:
    await store.create(prefix + "a", b"one")
    with pytest.raises(errors.KeyExists):
        await store.create(prefix + "a", b"two")
    assert (await store.get(prefix + "a")).value == b"one"


async def test_get_raises_key_not_found_for_a_missing_key(store: AnyStore, prefix: str) -> None:
    with pytest.raises(errors.KeyNotFound) as caught:
        await store.get(prefix + "missing")
    assert caught.value.key == prefix + "missing"


async def test_a_consistent_read_sees_a_write_made_by_another_etcd_client(
    etcd_backed_store: AnyStore, prefix: str, request: pytest.FixtureRequest
) -> None:
    store = etcd_backed_store
    etcd_endpoint: str = request.getfixturevalue("etcd_endpoint")
    async with EtcdStore(etcd_endpoint, key_prefix="/registry") as other:
        created = await other.create(prefix + "a", b"one")
        assert await store.get(prefix + "a") == created
        assert (await store.list(prefix)).items == [created]
        updated = await other.guaranteed_update(prefix + "a", lambda kv: b"two")
        assert await store.get(prefix + "a") == updated
        assert (await store.list(prefix)).items == [updated]
        deleted = await other.delete(prefix + "a")
        with pytest.raises(errors.KeyNotFound):
            await store.get(prefix + "a")
        listed = await store.list(prefix)
        assert listed.items == []
        assert listed.revision >= deleted.mod_revision


async def test_a_resource_version_0_read_answers_without_error(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")
    assert await store.get(prefix + "a", consistent=False) == created
    assert (await store.list(prefix, consistent=False)).items == [created]


# -- guaranteed_update -----------------------------------------------------------------------


async def test_concurrent_updates_all_land_and_none_is_lost(store: AnyStore, prefix: str) -> None:
    await store.create(prefix + "counter", b'{"n": 0}')
    await asyncio.gather(
        *(store.guaranteed_update(prefix + "counter", _increment) for _ in range(20))
    )
    assert json.loads((await store.get(prefix + "counter")).value) == {"n": 20}


async def test_update_returns_the_new_value_at_a_newer_revision(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b'{"n": 0}')
    updated = await store.guaranteed_update(prefix + "a", _increment)
    assert updated.value == b'{"n": 1}'
    assert updated.mod_revision > created.mod_revision
    assert updated.create_revision == created.create_revision
    assert await store.get(prefix + "a") == updated


async def test_update_is_rejected_with_conflict_when_expected_revision_is_stale(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b'{"n": 0}')
    latest = await store.guaranteed_update(prefix + "a", _increment)
    with pytest.raises(errors.Conflict) as caught:
        await store.guaranteed_update(
            prefix + "a", _increment, expected_revision=created.mod_revision
        )
    assert caught.value.current_revision == latest.mod_revision
    assert await store.get(prefix + "a") == latest


async def test_update_with_the_current_expected_revision_succeeds(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b'{"n": 0}')
    updated = await store.guaranteed_update(
        prefix + "a", _increment, expected_revision=created.mod_revision
    )
    assert updated.value == b'{"n": 1}'


async def test_update_propagates_what_mutate_raises_and_writes_nothing(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")

    def refuse(kv: KeyValue) -> bytes:
        raise LookupError("no thanks")

    with pytest.raises(LookupError, match="no thanks"):
        await store.guaranteed_update(prefix + "a", refuse)
    assert await store.get(prefix + "a") == created


@pytest.mark.parametrize("result", [None, b"same"])
async def test_update_writes_nothing_when_mutate_changes_nothing(
    store: AnyStore, prefix: str, result: bytes | None
) -> None:
    created = await store.create(prefix + "a", b"same")
    before = await store.current_revision()
    unchanged = await store.guaranteed_update(prefix + "a", lambda kv: result)
    assert unchanged == created
    assert await store.current_revision() == before


async def test_update_of_a_missing_key_raises_key_not_found(store: AnyStore, prefix: str) -> None:
    with pytest.raises(errors.KeyNotFound):
        await store.guaranteed_update(prefix + "missing", _increment)


# -- delete ----------------------------------------------------------------------------------


async def test_delete_returns_the_last_value_at_the_delete_revision(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")
    deleted = await store.delete(prefix + "a")
    assert deleted.value == b"one"
    assert deleted.mod_revision > created.mod_revision
    assert deleted.create_revision == created.create_revision
    with pytest.raises(errors.KeyNotFound):
        await store.get(prefix + "a")


async def test_delete_is_rejected_with_conflict_when_expected_revision_is_stale(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")
    latest = await store.guaranteed_update(prefix + "a", lambda kv: b"two")
    with pytest.raises(errors.Conflict) as caught:
        await store.delete(prefix + "a", expected_revision=created.mod_revision)
    assert caught.value.current_revision == latest.mod_revision
    deleted = await store.delete(prefix + "a", expected_revision=latest.mod_revision)
    assert deleted.value == b"two"


async def test_delete_of_a_missing_key_raises_key_not_found(store: AnyStore, prefix: str) -> None:
    with pytest.raises(errors.KeyNotFound):
        await store.delete(prefix + "missing")
    with pytest.raises(errors.KeyNotFound):
        await store.delete(prefix + "missing", expected_revision=5)


# -- list ------------------------------------------------------------------------------------


async def test_list_returns_the_keys_under_the_prefix_in_key_order(
    store: AnyStore, prefix: str
) -> None:
    for name in ["b", "a", "c/x", "c"]:
        await store.create(prefix + "ns/" + name, name.encode())
    await store.create(prefix + "nt", b"outside")
    result = await store.list(prefix + "ns/")
    assert [kv.key for kv in result.items] == [prefix + "ns/" + n for n in ["a", "b", "c", "c/x"]]
    assert result.continue_token is None
    assert result.revision >= max(kv.mod_revision for kv in result.items)


async def test_list_of_an_empty_prefix_is_empty(store: AnyStore, prefix: str) -> None:
    result = await store.list(prefix + "nothing/", limit=10)
    assert result.items == []
    assert result.continue_token is None


async def test_list_pages_are_consistent_at_one_revision_while_writes_happen_between_pages(
    store: AnyStore, prefix: str
) -> None:
    for i in range(7):
        await store.create(f"{prefix}k{i}", f"v{i}".encode())
    snapshot = await store.list(prefix)

    first = await store.list(prefix, limit=3)
    assert first.remaining == 4
    assert first.continue_token is not None
    await store.delete(f"{prefix}k4")
    await store.guaranteed_update(f"{prefix}k5", lambda kv: b"changed")
    await store.create(f"{prefix}k3a", b"new")
    second = await store.list(prefix, limit=3, continue_token=first.continue_token)
    third = await store.list(prefix, limit=3, continue_token=second.continue_token)

    assert first.revision == second.revision == third.revision == snapshot.revision
    assert first.items + second.items + third.items == snapshot.items
    assert third.continue_token is None
    assert third.remaining == 0


async def test_list_continue_after_compaction_raises_expired(store: AnyStore, prefix: str) -> None:
    for i in range(4):
        await store.create(f"{prefix}k{i}", b"v")
    first = await store.list(prefix, limit=2)
    latest = await store.create(f"{prefix}later", b"v")
    await store.compact(latest.mod_revision)
    with pytest.raises(errors.Expired):
        await store.list(prefix, limit=2, continue_token=first.continue_token)


@pytest.mark.parametrize("token", ["%%%", "bm90LWpzb24", "eyJ2IjoieCJ9"])
async def test_list_with_a_malformed_continue_token_raises_invalid_continue(
    store: AnyStore, prefix: str, token: str
) -> None:
    with pytest.raises(errors.InvalidContinue):
        await store.list(prefix, continue_token=token)


async def test_list_at_an_older_revision_reads_that_revision(store: AnyStore, prefix: str) -> None:
    first = await store.create(prefix + "a", b"one")
    await store.guaranteed_update(prefix + "a", lambda kv: b"two")
    await store.create(prefix + "b", b"other")
    old = await store.list(prefix, revision=first.mod_revision)
    assert old.items == [first]
    assert old.revision == first.mod_revision


# -- watch -----------------------------------------------------------------------------------


async def test_watch_yields_exactly_the_events_after_the_revision_in_order(
    store: AnyStore, prefix: str
) -> None:
    before = await store.create(prefix + "a", b"one")
    modified = await store.guaranteed_update(prefix + "a", lambda kv: b"two")
    added = await store.create(prefix + "b", b"three")
    deleted = await store.delete(prefix + "a")
    await store.create(prefix.rstrip("/") + "-sibling/x", b"not watched")

    async with store.watch(prefix, after_revision=before.mod_revision) as events:
        got = await next_changes(events, 3)
        last = await store.create(prefix + "c", b"live")
        got += await next_changes(events, 1)

    assert [(e.type, e.revision) for e in got] == [
        ("MODIFIED", modified.mod_revision),
        ("ADDED", added.mod_revision),
        ("DELETED", deleted.mod_revision),
        ("ADDED", last.mod_revision),
    ]
    assert got[0].kv == modified
    assert got[0].prev == before
    assert got[2].kv == KeyValue(prefix + "a", b"two", deleted.mod_revision, before.create_revision)
    assert got[2].prev == modified


async def test_watch_from_a_compacted_revision_raises_expired(store: AnyStore, prefix: str) -> None:
    await store.create(prefix + "a", b"one")
    latest = await store.guaranteed_update(prefix + "a", lambda kv: b"two")
    await store.compact(latest.mod_revision)
    with pytest.raises(errors.Expired):
        async with asyncio.timeout(10), store.watch(prefix, after_revision=1) as events:
            async for _ in events:
                pass


async def test_watch_resumed_from_the_last_seen_revision_has_no_gaps_or_duplicates(
    store: AnyStore, prefix: str
) -> None:
    start = await store.current_revision()
    written = [await store.create(f"{prefix}k{i}", b"v") for i in range(3)]
    async with store.watch(prefix, after_revision=start) as events:
        seen = await next_changes(events, 2)
    written += [await store.create(f"{prefix}k{i}", b"v") for i in range(3, 6)]
    async with store.watch(prefix, after_revision=seen[-1].revision) as events:
        seen += await next_changes(events, 4)
    assert [e.revision for e in seen] == [kv.mod_revision for kv in written]
    assert [e.kv for e in seen] == written


async def test_watch_yields_progress_events_when_idle_and_asked_to(
    store: AnyStore, prefix: str
) -> None:
    created = await store.create(prefix + "a", b"one")
    async with store.watch(
        prefix, after_revision=created.mod_revision, progress_interval=0.1
    ) as events:
        async with asyncio.timeout(10):
            event = await anext(events)
    assert event.type == "PROGRESS"
    assert event.kv is None
    assert event.revision >= created.mod_revision
