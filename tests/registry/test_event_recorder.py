"""`EventRecorder`: what it does with a backlog of Events, and with too many.

The recorder's writer here is the cluster's kind (`writer=`): a callable that receives
each Event. It holds every write until the test opens its gate, so what is in flight at
once can be counted; the code under test is the recorder's own queue and writers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

from plnt.processes import tasks
from plnt.registry import coreevents, events
from plnt.registry.changes import Change, Transition
from plnt.registry.definitions import Object
from plnt.registry.store import ResourceStore
from plnt.storage.memory import MemoryStore
from tests.support.waiting import eventually

REASONS = ("First", "Second", "Third")
_uids = itertools.count()


def created(name: str) -> Change:
    """The change of a freshly created object (a uid of its own, as stored)."""
    meta = {
        "name": name,
        "namespace": "default",
        "uid": f"00000000-0000-0000-0000-{next(_uids):012d}",
        "creationTimestamp": "2026-12-06T00:00:00Z",
    }
    return Change(None, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})


def three_events(change: Change) -> Sequence[Transition]:
    return [
        Transition("Normal", reason, f"{reason} of {change.after['metadata']['name']}")
        for reason in REASONS
    ]


class HeldWriter:
    """An Event writer that holds each write until `gate` opens, counting those in flight."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.written: list[Object] = []

    async def __call__(self, event: Object) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            self.written.append(event)
        finally:
            self.in_flight -= 1


def recorder_with(
    writer: HeldWriter, memory_store: MemoryStore, **kwargs: Any
) -> events.EventRecorder:
    store = ResourceStore(coreevents.DEFINITION, memory_store)
    return events.EventRecorder(store, writer=writer, **kwargs)


async def test_a_backlog_is_written_concurrently_up_to_the_limit_and_each_objects_events_in_order(
    memory_store: MemoryStore,
) -> None:
    writer = HeldWriter()
    recorder = recorder_with(writer, memory_store, concurrent_writes=8)
    names = [f"run-{i}" for i in range(20)]
    for name in names:
        recorder.record_change(created(name), three_events)
    async with tasks.running(recorder.run(), name="recorder"):
        await eventually(lambda: writer.in_flight == 8, what="8 writes in flight")
        writer.gate.set()
        await recorder.flush()
    assert writer.most_in_flight == 8
    assert len(writer.written) == 3 * len(names)
    for name in names:
        reasons = [e["reason"] for e in writer.written if e["involvedObject"]["name"] == name]
        assert reasons == list(REASONS), name


async def test_one_objects_events_are_never_written_at_once(memory_store: MemoryStore) -> None:
    writer = HeldWriter()
    recorder = recorder_with(writer, memory_store, concurrent_writes=8)
    recorder.record_change(created("alone"), three_events)
    async with tasks.running(recorder.run(), name="recorder"):
        await eventually(lambda: writer.in_flight == 1, what="the first write in flight")
        writer.gate.set()
        await recorder.flush()
    assert writer.most_in_flight == 1
    assert [e["reason"] for e in writer.written] == list(REASONS)


async def test_a_creation_event_dropped_by_a_full_queue_wakes_the_retry_pass(
    memory_store: MemoryStore,
) -> None:
    writer = HeldWriter()
    recorder = recorder_with(writer, memory_store, queue_size=2)
    woken: list[int] = []
    recorder.on_creation_failure = lambda: woken.append(recorder.creation_failures)
    for name in ("a", "b", "c", "d"):
        recorder.record_change(created(name), three_events)
    assert (recorder.dropped, recorder.creation_failures, woken) == (2, 2, [1, 2])
    updated = Change(created("e").after, created("e").after)
    recorder.record_change(updated, three_events)
    assert (recorder.dropped, recorder.creation_failures) == (3, 2)
