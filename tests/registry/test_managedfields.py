"""Field sets in FieldsV1, comparisons and the managedFields entries every write records."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.registry import managedfields as mf
from plnt.registry.managedfields import field_path as fp

API = "plnt.work/v1"

keys = st.sampled_from(["a", "b", "c", "spec", "x.y/z"])
scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.text(max_size=3), st.none())
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)
objects = st.dictionaries(keys, json_values, max_size=4)
paths = st.lists(keys.map(lambda k: f"f:{k}"), min_size=1, max_size=4).map(tuple)
field_sets = st.frozensets(paths, max_size=8)


@given(field_sets)
def test_a_field_set_survives_the_round_trip_through_fields_v1(fields: frozenset[Any]) -> None:
    assert mf.from_fields_v1(mf.to_fields_v1(fields)) == fields


def test_fields_v1_marks_members_that_have_children_with_a_dot() -> None:
    fields = frozenset({fp("spec"), fp("spec", "replicas"), fp("metadata", "labels", "app")})
    assert mf.to_fields_v1(fields) == {
        "f:spec": {".": {}, "f:replicas": {}},
        "f:metadata": {"f:labels": {"f:app": {}}},
    }


@pytest.mark.parametrize(
    "bad",
    [[], {"spec": {}}, {"f:spec": []}, {".": {}}, {"f:spec": {".": {"x": 1}}}],
)
def test_malformed_fields_v1_is_refused(bad: Any) -> None:
    with pytest.raises(mf.ManagedFieldsError):
        mf.from_fields_v1(bad)


def test_paths_print_as_kube_prints_them() -> None:
    assert mf.path_string(fp("spec", "replicas")) == ".spec.replicas"
    assert mf.path_string(fp("metadata", "labels", "app.kubernetes.io/name")) == (
        ".metadata.labels.app.kubernetes.io/name"
    )
    assert mf.path_string(("f:spec", 'k:{"name":"c"}', "i:2")) == '.spec[name="c"][2]'


@given(objects)
def test_an_object_compared_with_itself_has_no_changes(obj: dict[str, Any]) -> None:
    diff = mf.compare(obj, obj)
    assert not (diff.added or diff.modified or diff.removed)


@given(objects, objects)
def test_added_and_removed_fields_mirror_each_other(a: dict[str, Any], b: dict[str, Any]) -> None:
    forward, backward = mf.compare(a, b), mf.compare(b, a)
    assert forward.added == backward.removed
    assert forward.removed == backward.added
    assert forward.modified == backward.modified


def test_comparison_treats_lists_as_one_field_and_bools_apart_from_numbers() -> None:
    diff = mf.compare({"l": [1, 2], "n": 1, "f": 1}, {"l": [1, 3], "n": True, "f": 1.0})
    assert diff.modified == {fp("l"), fp("n")}


def test_a_new_container_counts_as_added_with_everything_below_it() -> None:
    diff = mf.compare({}, {"spec": {"canary": {"weight": 5}}})
    assert diff.added == {fp("spec"), fp("spec", "canary"), fp("spec", "canary", "weight")}


def test_an_update_owns_what_it_changed_and_takes_it_from_others() -> None:
    old = {"spec": {"replicas": 1, "target": "local"}}
    new = {"spec": {"replicas": 3, "target": "local"}}
    creator = mf.Entry(
        "kubectl-create",
        mf.UPDATE,
        API,
        mf.with_parents({fp("spec", "target")}) | {fp("spec", "replicas")},
        "T0",
    )
    entries = mf.record_update(
        [creator], old, new, manager="kubectl-patch", api_version=API, now="T1"
    )
    by_manager = {e.manager: e for e in entries}
    assert by_manager["kubectl-patch"].fields == {fp("spec", "replicas")}
    assert by_manager["kubectl-patch"].time == "T1"
    assert fp("spec", "replicas") not in by_manager["kubectl-create"].fields
    assert by_manager["kubectl-create"].time == "T0"


def test_an_update_that_changes_nothing_records_nothing() -> None:
    obj = {"spec": {"replicas": 1}}
    mine = mf.Entry("m", mf.UPDATE, API, frozenset({fp("spec", "replicas")}), "T0")
    assert mf.record_update([mine], obj, obj, manager="m", api_version=API, now="T1") == [mine]


def test_removed_fields_leave_every_owner_and_empty_entries_are_dropped() -> None:
    owner = mf.Entry("a", mf.UPDATE, API, frozenset({fp("spec", "gpuClass")}), "T0")
    entries = mf.record_update(
        [owner],
        {"spec": {"gpuClass": "l4"}},
        {"spec": {}},
        manager="b",
        api_version=API,
        now="T1",
    )
    assert entries == []


def test_server_set_metadata_and_ignored_prefixes_are_never_owned() -> None:
    new = {
        "apiVersion": API,
        "kind": "WorkflowRun",
        "metadata": {"name": "x", "uid": "u", "generation": 1, "labels": {"a": "b"}},
        "status": {"phase": "Ready"},
    }
    entries = mf.record_update(
        [],
        {},
        new,
        manager="m",
        api_version=API,
        now="T",
        ignored=frozenset({fp("status")}),
    )
    assert mf.to_fields_v1(entries[0].fields) == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}


def test_status_writes_are_recorded_with_their_subresource() -> None:
    old = {"spec": {"replicas": 1}}
    new = {"spec": {"replicas": 1}, "status": {"phase": "Ready"}}
    ignored = mf.ignored_fields(old, new, subresource="status")
    (entry,) = mf.record_update(
        [],
        old,
        new,
        manager="saga",
        api_version=API,
        now="T",
        subresource="status",
        ignored=ignored,
    )
    assert entry.subresource == "status"
    assert entry.to_wire()["subresource"] == "status"
    assert entry.fields == {fp("status"), fp("status", "phase")}


def test_entries_decode_and_encode_in_kube_order() -> None:
    wire = [
        mf.Entry("b", mf.UPDATE, API, frozenset({fp("x")}), "2026-01-02T00:00:00Z").to_wire(),
        mf.Entry("a", mf.UPDATE, API, frozenset({fp("y")}), "2026-01-01T00:00:00Z").to_wire(),
        mf.Entry("z", mf.APPLY, API, frozenset({fp("z")}), "2026-01-03T00:00:00Z").to_wire(),
    ]
    assert [e["manager"] for e in mf.encode(mf.decode(wire))] == ["z", "a", "b"]


@pytest.mark.parametrize(
    "entry",
    [
        {"manager": "m", "operation": "Patch", "apiVersion": API, "fieldsType": "FieldsV1"},
        {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1"},
        {"manager": "m", "operation": "Update", "apiVersion": API, "fieldsType": "FieldsV2"},
        {
            "manager": "m",
            "operation": "Update",
            "apiVersion": API,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"spec": {}},
        },
        "not an entry",
    ],
)
def test_invalid_entries_are_refused(entry: Any) -> None:
    with pytest.raises(mf.ManagedFieldsError):
        mf.decode([entry])


def test_client_sent_entries_replace_reset_or_fall_back_to_the_live_ones() -> None:
    live_entry = mf.Entry("live", mf.UPDATE, API, frozenset({fp("a")}), "T")
    live = {"metadata": {"managedFields": mf.encode([live_entry])}}
    sent_entry = mf.Entry("sent", mf.APPLY, API, frozenset({fp("b")}), "T")
    sent = mf.encode([sent_entry])
    assert mf.base_entries(sent, live, subresource="") == [sent_entry]
    assert mf.base_entries([], live, subresource="") == []
    assert mf.base_entries([{}], live, subresource="") == []
    assert mf.base_entries(None, live, subresource="") == [live_entry]
    assert mf.base_entries([{"bad": 1}], live, subresource="") == [live_entry]
    assert mf.base_entries(sent, live, subresource="status") == [live_entry]
