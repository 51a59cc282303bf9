"""`ResourceStore.after_write`: every write path records the kind's transition Events alike.

The store runs over the in-memory store (storage is not what these tests are about); the
Event sink records synchronously, so each test reads exactly the Events of the writes it
made (the recorder's queue is not involved).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from plnt.api import errors
from plnt.registry import coreevents, events, plntbackends, workflowruns
from plnt.registry.changes import Change, TransitionRules
from plnt.registry.definitions import Object
from plnt.registry.options import DeleteOptions, ListOptions, WriteOptions
from plnt.registry.store import ResourceStore
from plnt.registry.workflowruns import rollback, scale
from plnt.storage.memory import MemoryStore

DIGEST = "sha256:" + "cd" * 32
NS = "default"


class RecordingSink:
    """An EventSink that keeps (name, type, reason, message) of every Event, in order."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []

    def record_change(self, change: Change, rules: TransitionRules) -> None:
        name = change.after["metadata"]["name"]
        for t in rules(change):
            self.recorded.append((name, t.type, t.reason, t.message))

    def of(self, name: str) -> list[tuple[str, str, str]]:
        return [(t, r, m) for n, t, r, m in self.recorded if n == name]


def workflowrun(name: str, **spec: Any) -> Object:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}, **spec},
    }


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def runs(memory_store: MemoryStore, sink: RecordingSink) -> ResourceStore:
    return ResourceStore(workflowruns.DEFINITION, memory_store, events=sink)


def with_replicas(replicas: int) -> Callable[[Object], Object]:
    def change(obj: Object) -> Object:
        obj["spec"]["replicas"] = replicas
        return obj

    return change


async def by_put(store: ResourceStore, name: str) -> None:
    current = await store.get(NS, name)
    body = with_replicas(2)(copy.deepcopy(current))
    await store.update(NS, name, lambda old: body, WriteOptions())


async def by_patch(store: ResourceStore, name: str) -> None:
    await store.update(NS, name, with_replicas(2), WriteOptions(is_patch=True))


async def by_apply(store: ResourceStore, name: str) -> None:
    config = workflowrun(name, replicas=2)
    await store.apply(NS, name, config, WriteOptions(field_manager="t", force=True))


async def by_scale(store: ResourceStore, name: str) -> None:
    await scale.write(store, NS, name, lambda current: {"spec": {"replicas": 2}}, WriteOptions())


Path = Callable[[ResourceStore, str], Awaitable[None]]


@pytest.mark.parametrize("write", [by_put, by_patch, by_apply, by_scale], ids=lambda w: w.__name__)
async def test_every_write_path_records_the_same_spec_change_event(
    runs: ResourceStore, sink: RecordingSink, write: Path
) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())
    await write(runs, "r")
    assert sink.of("r") == [
        ("Normal", "Accepted", f"generation 1 accepted: oci://r.example/wf:1@{DIGEST}"),
        ("Normal", "SpecChanged", "generation 2 accepted"),
    ]


async def test_server_side_apply_that_creates_records_accepted(
    runs: ResourceStore, sink: RecordingSink
) -> None:
    await runs.apply(NS, "new", workflowrun("new"), WriteOptions(field_manager="t"))
    assert [r for _, r, _ in sink.of("new")] == ["Accepted"]


async def test_a_status_write_with_a_new_phase_records_phase_changed(
    runs: ResourceStore, sink: RecordingSink
) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())

    def ready(obj: Object) -> Object:
        obj["status"] = {"phase": "Ready"}
        return obj

    await runs.update(NS, "r", ready, WriteOptions(), subresource="status")
    assert sink.of("r")[1:] == [("Normal", "PhaseChanged", "phase <none> → Ready")]


async def test_dry_runs_and_writes_that_change_nothing_record_no_events(
    runs: ResourceStore, sink: RecordingSink
) -> None:
    dry = WriteOptions(dry_run=True)
    await runs.create(NS, workflowrun("dry"), dry)
    await runs.create(NS, workflowrun("r"), WriteOptions())
    await runs.update(NS, "r", with_replicas(5), dry)
    await scale.write(runs, NS, "r", lambda current: {"spec": {"replicas": 5}}, dry)
    await runs.update(NS, "r", lambda obj: obj, WriteOptions())
    await runs.delete(NS, "r", DeleteOptions(dry_run=True))
    assert [(n, r) for n, _, r, _ in sink.recorded] == [("r", "Accepted")]


async def test_a_delete_records_deleted(runs: ResourceStore, sink: RecordingSink) -> None:
    await runs.create(NS, workflowrun("r"), WriteOptions())
    _, gone = await runs.delete(NS, "r", DeleteOptions())
    assert gone
    assert sink.of("r")[1:] == [("Normal", "Deleted", "generation 1 deleted")]


async def test_a_delete_held_by_a_finalizer_records_the_request_then_the_removal(
    memory_store: MemoryStore, sink: RecordingSink
) -> None:
    runs = ResourceStore(workflowruns.with_teardown(), memory_store, events=sink)
    await runs.create(NS, workflowrun("r"), WriteOptions())
    _, gone = await runs.delete(NS, "r", DeleteOptions())
    assert not gone
    await runs.delete(NS, "r", DeleteOptions())  # already being deleted: no new write

    def release(obj: Object) -> Object:
        obj["metadata"]["finalizers"] = []
        return obj

    await runs.update(NS, "r", release, WriteOptions(is_patch=True))
    with pytest.raises(errors.NotFound):
        await runs.get(NS, "r")
    assert sink.of("r")[1:] == [
        ("Normal", "DeletionRequested", "deletion requested; waiting for plnt.work/teardown"),
        ("Normal", "Deleted", "generation 1 deleted"),
    ]


async def test_a_delete_collection_records_deleted_for_each_object(
    runs: ResourceStore, sink: RecordingSink
) -> None:
    for name in ("a", "b"):
        await runs.create(NS, workflowrun(name), WriteOptions())
    await runs.delete_collection(NS, ListOptions(), DeleteOptions())
    assert [(n, r) for n, _, r, _ in sink.recorded if r == "Deleted"] == [
        ("a", "Deleted"),
        ("b", "Deleted"),
    ]


async def test_a_rollback_records_the_request_then_the_spec_change(
    runs: ResourceStore, sink: RecordingSink
) -> None:
    newer = workflowrun("r")
    newer["spec"]["workflow"] = {"ref": "oci://r.example/wf:2", "digest": "sha256:" + "ef" * 32}
    await runs.create(NS, newer, WriteOptions())

    def promoted(obj: Object) -> Object:
        obj["status"] = {
            "revision": 2,
            "history": [
                {"revision": 1, "digest": DIGEST, "ref": "oci://r.example/wf:1"},
                {"revision": 2, "digest": "sha256:" + "ef" * 32, "ref": "oci://r.example/wf:2"},
            ],
        }
        return obj

    await runs.update(NS, "r", promoted, WriteOptions(), subresource="status")
    await rollback.rollback(runs, NS, "r", to_revision=None, options=WriteOptions())
    assert sink.of("r")[1:] == [
        ("Normal", "RollbackRequested", "rollback to revision 1 requested"),
        ("Normal", "SpecChanged", "generation 2 accepted"),
    ]


def test_the_recorder_is_the_sink_of_exactly_the_stores_whose_kind_has_transition_rules(
    memory_store: MemoryStore,
) -> None:
    stores = {
        (d.group, d.plural): ResourceStore(d, memory_store)
        for d in (workflowruns.DEFINITION, plntbackends.DEFINITION, coreevents.DEFINITION)
    }
    recorder = events.EventRecorder.for_stores(stores)
    assert stores[("plnt.work", "workflowruns")].events is recorder
    assert stores[("plnt.work", "plntbackends")].events is None
    assert stores[("", "events")].events is None
