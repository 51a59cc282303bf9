"""`ResourceStore.encoded`: a served object's JSON is encoded once per resourceVersion.

The store runs over the in-memory store (storage is not what these tests are about). The
encoder is counted by wrapping `served.answer_json`, the one function the cache runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from plnt.api import codec
from plnt.registry import served, workflowruns
from plnt.registry.definitions import Object
from plnt.registry.options import DeleteOptions, ListOptions, WriteOptions
from plnt.registry.store import ResourceStore
from plnt.storage.memory import MemoryStore

DIGEST = "sha256:" + "cd" * 32
NS = "default"
GETS = 25


def workflowrun(name: str, **spec: object) -> Object:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}, **spec},
    }


def with_replicas(replicas: int) -> Callable[[Object], Object]:
    def change(obj: Object) -> Object:
        obj["spec"]["replicas"] = replicas
        return obj

    return change


@pytest.fixture
def runs(memory_store: MemoryStore) -> ResourceStore:
    return ResourceStore(workflowruns.DEFINITION, memory_store)


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[Object]:
    """Every object the cache's encoder is run on, in order."""
    seen: list[Object] = []
    real = served.answer_json

    def counting(obj: Object) -> bytes:
        seen.append(obj)
        return real(obj)

    monkeypatch.setattr(served, "answer_json", counting)
    return seen


async def get_bytes(store: ResourceStore, name: str, resource_version: str = "") -> bytes:
    return store.encoded(await store.get(NS, name, resource_version=resource_version))


async def test_many_gets_of_one_resource_version_encode_once(
    runs: ResourceStore, encodings: list[Object]
) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())
    answers = [await get_bytes(runs, "r", rv) for rv in ("", "0") * GETS]
    assert len(encodings) == 1
    assert all(answer is answers[0] for answer in answers)
    await runs.update(NS, "r", with_replicas(3), WriteOptions(is_patch=True))
    again = [await get_bytes(runs, "r") for _ in range(GETS)]
    assert len(encodings) == 2
    assert len(set(again)) == 1


async def test_the_cached_bytes_are_the_encoding_of_the_object_key_order_included(
    runs: ResourceStore,
) -> None:
    created = await runs.create(NS, workflowrun("r", replicas=2), WriteOptions())
    obj = await runs.get(NS, "r")
    data = runs.encoded(obj)
    assert data == codec.dumps(obj)
    assert list(codec.loads(data)["metadata"]) == list(obj["metadata"])
    assert list(codec.loads(data)["metadata"])[-1] == "resourceVersion"
    assert codec.loads(data) == created.object


async def test_a_get_after_an_update_answers_the_new_bytes(runs: ResourceStore) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())
    before = codec.loads(await get_bytes(runs, "r"))
    written = await runs.update(NS, "r", with_replicas(4), WriteOptions(is_patch=True))
    after = codec.loads(await get_bytes(runs, "r"))
    assert after["spec"]["replicas"] == 4
    assert after["metadata"]["resourceVersion"] == written.object["metadata"]["resourceVersion"]
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


async def test_a_list_item_is_the_same_bytes_as_its_get(
    runs: ResourceStore, encodings: list[Object]
) -> None:
    for name in ("a", "b"):
        await runs.create(NS, workflowrun(name), WriteOptions())
    page = await runs.list(NS, ListOptions())
    listed = {obj["metadata"]["name"]: runs.encoded(obj) for obj in page.items}
    assert listed["a"] is await get_bytes(runs, "a")
    assert listed["b"] is await get_bytes(runs, "b")
    assert len(encodings) == 2


async def test_a_deleted_and_recreated_name_answers_the_new_object(runs: ResourceStore) -> None:
    await runs.create(NS, workflowrun("r", replicas=1), WriteOptions())
    old = codec.loads(await get_bytes(runs, "r"))
    await runs.delete(NS, "r", DeleteOptions())
    await runs.create(NS, workflowrun("r", replicas=5), WriteOptions())
    new = codec.loads(await get_bytes(runs, "r"))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["replicas"] == 5


async def test_an_object_built_per_request_is_encoded_as_it_is(
    runs: ResourceStore, encodings: list[Object]
) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())
    served_obj = await runs.get(NS, "r")
    runs.encoded(served_obj)
    other = copy.deepcopy(served_obj)
    other["metadata"]["resourceVersion"] = "999"
    assert codec.loads(runs.encoded(other))["metadata"]["resourceVersion"] == "999"
    assert codec.loads(runs.encoded(served_obj))["metadata"]["resourceVersion"] != "999"
    assert len(encodings) == 2  # the copy is encoded (every time), the served one once


async def test_evicted_objects_are_decoded_and_encoded_again(memory_store: MemoryStore) -> None:
    small = ResourceStore(workflowruns.DEFINITION, memory_store, decoded_cache_size=2)
    for name in ("a", "b", "c"):
        await small.create(NS, workflowrun(name), WriteOptions())
    first = await small.get(NS, "a")
    first_bytes = small.encoded(first)
    for name in ("b", "c"):  # pushes "a" out
        small.encoded(await small.get(NS, name))
    again = await small.get(NS, "a")
    assert again is not first
    assert small.encoded(again) == first_bytes
