"""The apply merge: field sets of configurations, pruning, conflicts and force."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.api import errors
from plnt.api.workflowruns import WorkflowRun
from plnt.registry import applying
from plnt.registry import managedfields as mf
from plnt.registry.managedfields import field_path as fp

API = "plnt.work/v1"
DIGEST = "sha256:" + "ab" * 32
STATUS = frozenset({fp("status")})


def config(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"workflow": {"ref": "oci-layout:wf:1", "digest": DIGEST}}
    body.update(spec)
    return {
        "apiVersion": API,
        "kind": "WorkflowRun",
        "metadata": {"name": "run", "namespace": "default"},
        "spec": body,
    }


def apply(
    live: dict[str, Any],
    cfg: dict[str, Any],
    entries: list[mf.Entry],
    *,
    manager: str = "me",
    force: bool = False,
) -> applying.Applied:
    return applying.apply(
        live,
        cfg,
        entries=entries,
        manager=manager,
        api_version=API,
        model=WorkflowRun,
        now="T",
        force=force,
        ignored=STATUS,
    )


def owned(result: applying.Applied, manager: str) -> frozenset[mf.Path]:
    return next(e.fields for e in result.entries if e.manager == manager)


def test_the_field_set_of_a_configuration_names_leaves_and_free_form_keys() -> None:
    cfg = config(replicas=2, canary={"smoke": {"input": {"q": {"deep": 1}}}})
    cfg["metadata"]["labels"] = {"app": "x"}
    fields = mf.strip(applying.field_set(WorkflowRun, cfg))
    assert mf.to_fields_v1(fields) == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:workflow": {"f:ref": {}, "f:digest": {}},
            "f:replicas": {},
            "f:canary": {"f:smoke": {"f:input": {"f:q": {".": {}, "f:deep": {}}}}},
        },
    }


def test_lists_are_one_field() -> None:
    cfg = {"apiVersion": API, "kind": "PlntBackend", "spec": {"models": ["a", "b"]}}
    from plnt.api.backends import PlntBackend

    assert applying.field_set(PlntBackend, cfg) >= {fp("spec", "models")}
    assert not any(len(p) > 2 for p in applying.field_set(PlntBackend, cfg))


def test_applying_to_nothing_creates_and_owns_the_configuration() -> None:
    result = apply({}, config(replicas=2), [])
    assert result.object["spec"]["replicas"] == 2
    (entry,) = result.entries
    assert (entry.manager, entry.operation) == ("me", mf.APPLY)
    assert fp("spec", "replicas") in entry.fields
    assert fp("metadata", "name") not in entry.fields


def test_a_field_dropped_from_the_configuration_is_removed() -> None:
    first = apply({}, config(replicas=2, gpuClass="l4"), [])
    second = apply(first.object, config(replicas=2), first.entries)
    assert "gpuClass" not in second.object["spec"]
    assert fp("spec", "gpuClass") not in owned(second, "me")


def test_a_dropped_field_another_manager_also_owns_stays() -> None:
    first = apply({}, config(gpuClass="l4"), [])
    shared = apply(first.object, config(gpuClass="l4"), first.entries, manager="other")
    second = apply(shared.object, config(), shared.entries)
    assert second.object["spec"]["gpuClass"] == "l4"


def test_a_dropped_object_goes_with_everything_below_it() -> None:
    first = apply({}, config(canary={"weight": 5, "analysis": {"maxErrorRate": 0.1}}), [])
    second = apply(first.object, config(), first.entries)
    assert "canary" not in second.object["spec"]


def test_changing_a_field_another_manager_owns_is_a_conflict() -> None:
    first = apply({}, config(replicas=1), [])
    patched = dict(first.object, spec={**first.object["spec"], "replicas": 5})
    entries = mf.record_update(
        first.entries, first.object, patched, manager="kubectl-patch", api_version=API, now="T1"
    )
    with pytest.raises(errors.Conflict) as caught:
        apply(patched, config(replicas=2), entries)
    status = caught.value.to_status()
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using plnt.work/v1: '
        ".spec.replicas"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-patch" using plnt.work/v1',
            "field": ".spec.replicas",
        }
    ]


def test_several_conflicts_are_listed_per_manager() -> None:
    live = config(replicas=1, gpuClass="l4")
    entries = [
        mf.Entry("b", mf.APPLY, API, frozenset({fp("spec", "replicas")}), "T"),
        mf.Entry("a", mf.UPDATE, API, frozenset({fp("spec", "gpuClass")}), "T"),
    ]
    with pytest.raises(errors.Conflict) as caught:
        apply(live, config(replicas=2, gpuClass="a100"), entries)
    assert caught.value.message == (
        'Apply failed with 2 conflicts: conflicts with "a" using plnt.work/v1:\n'
        "- .spec.gpuClass\n"
        'conflicts with "b":\n'
        "- .spec.replicas"
    )
    assert len(caught.value.causes) == 2


def test_applying_the_same_value_shares_the_field_instead_of_conflicting() -> None:
    live = config(replicas=3)
    other = mf.Entry("other", mf.UPDATE, API, frozenset({fp("spec", "replicas")}), "T")
    result = apply(live, config(replicas=3), [other])
    assert fp("spec", "replicas") in owned(result, "other")
    assert fp("spec", "replicas") in owned(result, "me")


def test_force_takes_the_field_over() -> None:
    live = config(replicas=3)
    other = mf.Entry("other", mf.UPDATE, API, frozenset({fp("spec", "replicas")}), "T")
    result = apply(live, config(replicas=4), [other], force=True)
    assert result.object["spec"]["replicas"] == 4
    assert [e.manager for e in result.entries] == ["me"]


def test_status_is_neither_applied_nor_owned() -> None:
    cfg = config()
    cfg["status"] = {"phase": "Ready"}
    result = apply({}, cfg, [])
    assert not any(p[0] == "f:status" for p in owned(result, "me"))


def test_a_reapply_that_changes_nothing_keeps_the_entry_time() -> None:
    first = apply({}, config(), [])
    again = applying.apply(
        first.object,
        config(),
        entries=first.entries,
        manager="me",
        api_version=API,
        model=WorkflowRun,
        now="LATER",
        ignored=STATUS,
    )
    assert again.entries == first.entries


def test_kubectl_may_take_fields_that_still_hold_the_client_side_applied_values() -> None:
    last = config(replicas=1)
    live = config(replicas=1)
    live["metadata"]["annotations"] = {applying.LAST_APPLIED: json.dumps(last)}
    csa = mf.Entry(
        "kubectl-client-side-apply", mf.UPDATE, API, frozenset({fp("spec", "replicas")}), "T"
    )
    result = apply(live, config(replicas=2), [csa], manager="kubectl")
    assert result.object["spec"]["replicas"] == 2
    recorded = json.loads(result.object["metadata"]["annotations"][applying.LAST_APPLIED])
    assert recorded["spec"]["replicas"] == 2
    with pytest.raises(errors.Conflict):
        apply(live, config(replicas=2), [csa], manager="someone-else")


@given(
    st.dictionaries(
        st.sampled_from(["app", "tier", "team"]), st.sampled_from(["a", "b"]), max_size=3
    ),
    st.dictionaries(
        st.sampled_from(["app", "tier", "team"]), st.sampled_from(["a", "b"]), max_size=3
    ),
)
def test_labels_converge_to_the_latest_configuration_of_a_sole_applier(
    first: dict[str, str], second: dict[str, str]
) -> None:
    one = config()
    one["metadata"]["labels"] = first
    two = config()
    two["metadata"]["labels"] = second
    applied = apply({}, one, [])
    result = apply(applied.object, two, applied.entries)
    assert (result.object["metadata"].get("labels") or {}) == second


@pytest.mark.parametrize(
    ("cfg", "text"),
    [
        ([], "must be an object"),
        ({"kind": "WorkflowRun"}, "must set apiVersion and kind"),
        ({"apiVersion": "plnt.work/v2", "kind": "WorkflowRun"}, "Incorrect version"),
        ({"apiVersion": API, "kind": "PlntBackend"}, "does not match the expected kind"),
        (
            {"apiVersion": API, "kind": "WorkflowRun", "metadata": {"name": "other"}},
            "does not match the name on the URL",
        ),
        (
            {"apiVersion": API, "kind": "WorkflowRun", "metadata": {"managedFields": []}},
            "metadata.managedFields must be nil",
        ),
        (
            {"apiVersion": API, "kind": "WorkflowRun", "spec": {"colour": "blue"}},
            ".spec.colour: field not declared in schema",
        ),
    ],
)
def test_unusable_configurations_are_bad_requests(cfg: Any, text: str) -> None:
    with pytest.raises(errors.BadRequest) as caught:
        applying.check_configuration(
            cfg,
            api_version=API,
            kind="WorkflowRun",
            model=WorkflowRun,
            namespace="default",
            name="run",
            field_validation="Ignore",
        )
    assert text in caught.value.message


def test_duplicate_fields_follow_field_validation() -> None:
    def check(mode: str) -> list[str]:
        _, warnings = applying.check_configuration(
            config(),
            api_version=API,
            kind="WorkflowRun",
            model=WorkflowRun,
            namespace="default",
            name="run",
            field_validation=mode,
            duplicates=["spec.replicas"],
        )
        return warnings

    assert check("Warn") == ['duplicate field "spec.replicas"']
    assert check("Ignore") == []
    with pytest.raises(errors.BadRequest, match="error strict decoding YAML"):
        check("Strict")
