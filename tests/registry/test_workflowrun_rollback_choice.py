"""Which revision a WorkflowRun rollback returns to, and the spec that pins it (pure rules)."""

from __future__ import annotations

from typing import Any

import pytest

from plnt.api import errors
from plnt.registry.workflowruns import rollback

RESOURCE = errors.GroupResource("plnt.work", "workflowruns")


def digest(n: int) -> str:
    return "sha256:" + f"{n:x}" * 64


def run(*, revisions: int, promoted: int | None = None) -> dict[str, Any]:
    """A run pinned to revision `revisions` whose history holds revisions 1..N."""
    status: dict[str, Any] = {
        "history": [
            {"revision": r, "digest": digest(r), "ref": f"oci://r.example/wf:{r}"}
            for r in range(1, revisions + 1)
        ]
    }
    if promoted is not None:
        status["revision"] = promoted
    return {
        "metadata": {"name": "r", "generation": 4, "resourceVersion": "17"},
        "spec": {
            "workflow": {"ref": f"oci://r.example/wf:{revisions}", "digest": digest(revisions)}
        },
        "status": status,
    }


def test_the_default_is_the_revision_before_the_promoted_one() -> None:
    chosen = rollback.choose_revision(run(revisions=3, promoted=3), name="r", to_revision=None)
    assert chosen["revision"] == 2


def test_the_default_counts_from_the_promoted_revision_not_the_newest_record() -> None:
    chosen = rollback.choose_revision(run(revisions=3, promoted=2), name="r", to_revision=None)
    assert chosen["revision"] == 1


def test_an_empty_history_is_a_bad_request_saying_there_is_nothing_earlier() -> None:
    with pytest.raises(errors.BadRequest) as raised:
        rollback.choose_revision(run(revisions=0), name="r", to_revision=None)
    assert raised.value.message == "workflowrun r has no earlier revision to roll back to"


def test_the_oldest_promoted_revision_has_nothing_earlier() -> None:
    with pytest.raises(errors.BadRequest):
        rollback.choose_revision(run(revisions=1, promoted=1), name="r", to_revision=None)


def test_an_unknown_revision_is_invalid_naming_to_revision_and_listing_the_known_ones() -> None:
    with pytest.raises(errors.Invalid) as raised:
        rollback.choose_revision(run(revisions=2, promoted=2), name="r", to_revision=7)
    [cause] = raised.value.causes
    assert cause.field == "toRevision"
    assert cause.reason == "FieldValueNotFound"
    assert "known revisions: 1, 2" in cause.message


def test_a_named_revision_in_an_empty_history_is_invalid_with_none_known() -> None:
    with pytest.raises(errors.Invalid) as raised:
        rollback.choose_revision(run(revisions=0), name="r", to_revision=1)
    assert "known revisions: none" in raised.value.causes[0].message


def test_a_named_revision_is_chosen_even_when_it_is_newer_than_the_promoted_one() -> None:
    chosen = rollback.choose_revision(run(revisions=3, promoted=1), name="r", to_revision=3)
    assert chosen["digest"] == digest(3)


def test_rolling_back_pins_the_revision_and_annotates_the_generation_it_produces() -> None:
    new = rollback.rolled_back(
        run(revisions=3, promoted=3), name="r", to_revision=None, resource=RESOURCE
    )
    assert new["spec"]["workflow"] == {"ref": "oci://r.example/wf:2", "digest": digest(2)}
    assert new["metadata"]["annotations"] == {
        "plnt.work/rollback-to": "2",
        "plnt.work/rollback-generation": "5",
    }
    assert "resourceVersion" not in new["metadata"]


def test_rolling_back_to_the_revision_the_spec_pins_is_a_conflict() -> None:
    with pytest.raises(errors.Conflict) as raised:
        rollback.rolled_back(
            run(revisions=2, promoted=2), name="r", to_revision=2, resource=RESOURCE
        )
    assert "nothing to roll back" in raised.value.message
