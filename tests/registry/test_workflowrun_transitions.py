"""Which Events a WorkflowRun change deserves: pure rules from a stored Change."""

from __future__ import annotations

import copy
from typing import Any

from plnt.registry.changes import Change, Transition
from plnt.registry.workflowruns.transitions import workflowrun_transitions

DIGEST = "sha256:" + "cd" * 32


def run(*, generation: int = 1, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "r", "generation": generation},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}},
    }
    obj.update(extra)
    return obj


def reasons(change: Change) -> list[tuple[str, str, str]]:
    return [(t.type, t.reason, t.message) for t in workflowrun_transitions(change)]


def test_a_create_is_accepted_naming_the_pinned_workflow() -> None:
    assert workflowrun_transitions(Change(None, run())) == [
        Transition("Normal", "Accepted", f"generation 1 accepted: oci://r.example/wf:1@{DIGEST}")
    ]


def test_a_generation_bump_is_a_spec_change() -> None:
    assert reasons(Change(run(), run(generation=2))) == [
        ("Normal", "SpecChanged", "generation 2 accepted")
    ]


def test_a_write_that_keeps_the_generation_and_phase_deserves_no_event() -> None:
    labelled = run()
    labelled["metadata"]["labels"] = {"team": "x"}
    assert reasons(Change(run(), labelled)) == []


def test_a_new_phase_is_an_event_and_a_failed_one_a_warning() -> None:
    ready = run(status={"phase": "Ready"})
    assert reasons(Change(run(), ready)) == [("Normal", "PhaseChanged", "phase <none> → Ready")]
    failed = run(status={"phase": "Failed"})
    assert reasons(Change(ready, failed)) == [("Warning", "PhaseChanged", "phase Ready → Failed")]


def test_a_rollback_is_requested_before_its_spec_change() -> None:
    after = run(generation=3)
    after["metadata"]["annotations"] = {
        "plnt.work/rollback-to": "1",
        "plnt.work/rollback-generation": "3",
    }
    assert reasons(Change(run(generation=2), after)) == [
        ("Normal", "RollbackRequested", "rollback to revision 1 requested"),
        ("Normal", "SpecChanged", "generation 3 accepted"),
    ]


def test_an_edit_after_a_rollback_is_not_another_rollback() -> None:
    rolled = run(generation=3)
    rolled["metadata"]["annotations"] = {
        "plnt.work/rollback-to": "1",
        "plnt.work/rollback-generation": "3",
    }
    edited = copy.deepcopy(rolled)
    edited["metadata"]["generation"] = 4
    assert [r for _, r, _ in reasons(Change(rolled, edited))] == ["SpecChanged"]


def test_a_deletion_held_by_finalizers_is_requested_naming_them() -> None:
    before = run()
    before["metadata"]["finalizers"] = ["plnt.work/teardown"]
    marked = copy.deepcopy(before)
    marked["metadata"]["deletionTimestamp"] = "2026-07-01T10:00:00Z"
    assert reasons(Change(before, marked)) == [
        ("Normal", "DeletionRequested", "deletion requested; waiting for plnt.work/teardown")
    ]


def test_leaving_storage_is_deleted_whichever_write_removed_it() -> None:
    assert reasons(Change(run(), run(), gone=True)) == [
        ("Normal", "Deleted", "generation 1 deleted")
    ]
    marked = run()
    marked["metadata"]["deletionTimestamp"] = "2026-07-01T10:00:00Z"
    marked["metadata"]["finalizers"] = ["plnt.work/teardown"]
    released = copy.deepcopy(marked)
    del released["metadata"]["finalizers"]
    assert [r for _, r, _ in reasons(Change(marked, released, gone=True))] == ["Deleted"]
