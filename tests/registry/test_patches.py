"""Merge, JSON and strategic-merge patches apply as RFC 7386 / RFC 6902 / plnt's rule say."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.registry import patches
from plnt.registry.patches import (
    MalformedPatch,
    PatchOperationFailed,
    TooManyPatchOperations,
    UnsupportedPatchDirective,
)

RUN = {
    "metadata": {"name": "summarize", "labels": {"team": "a"}},
    "spec": {"replicas": 1, "canary": {"weight": 10}, "list": [1, 2]},
}


def test_a_merge_patch_merges_objects_replaces_lists_and_deletes_with_null() -> None:
    patched = patches.apply_merge_patch(
        RUN,
        {
            "metadata": {"labels": {"team": None, "tier": "gold"}},
            "spec": {"replicas": 3, "list": [9], "canary": None},
        },
    )
    assert patched == {
        "metadata": {"name": "summarize", "labels": {"tier": "gold"}},
        "spec": {"replicas": 3, "list": [9]},
    }


def test_a_merge_patch_that_is_not_an_object_is_malformed() -> None:
    with pytest.raises(MalformedPatch, match="must be a JSON object, got array"):
        patches.apply_merge_patch(RUN, [{"op": "add"}])


def test_a_json_patch_applies_its_operations_in_order() -> None:
    patched = patches.apply_json_patch(
        RUN,
        [
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicas", "value": 2},
            {"op": "add", "path": "/spec/list/-", "value": 3},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
            {"op": "move", "from": "/metadata/labels/team", "path": "/metadata/labels/owner"},
            {"op": "remove", "path": "/spec/canary"},
        ],
    )
    assert patched["spec"] == {"replicas": 2, "list": [1, 2, 3], "copy": [1, 2, 3]}
    assert patched["metadata"]["labels"] == {"owner": "a"}


@pytest.mark.parametrize(
    ("operations", "index", "fragment"),
    [
        ([{"op": "remove", "path": "/spec/nope"}], 0, "remove '/spec/nope'"),
        (
            [{"op": "add", "path": "/a", "value": 1}, {"op": "test", "path": "/a", "value": True}],
            1,
            "test failed: the value at '/a' is not true",
        ),
        ([{"op": "frobnicate", "path": "/a"}], 0, "Unknown operation 'frobnicate'"),
        ([{"op": "add", "path": "/spec/list/7", "value": 1}], 0, "can't insert outside of list"),
        ([{"op": "add", "path": "/a"}], 0, "'value'"),
        (["add"], 0, "an operation must be a JSON object, got string"),
        ([17], 0, "an operation must be a JSON object, got number"),
        ([{"op": "add", "path": 3, "value": 1}], 0, "'path' must be a string"),
        ([{"op": "add", "path": "/spec/replicas/x", "value": 1}], 0, "/spec/replicas/x"),
    ],
)
def test_a_failing_json_patch_operation_is_named_by_index_and_changes_nothing(
    operations: list[Any], index: int, fragment: str
) -> None:
    before = copy.deepcopy(RUN)
    with pytest.raises(PatchOperationFailed) as caught:
        patches.apply_json_patch(RUN, operations)
    assert caught.value.index == index
    assert f"json patch operation {index}" in str(caught.value)
    assert fragment in str(caught.value)
    assert before == RUN


def test_a_json_patch_over_ten_thousand_operations_is_refused_with_kubes_message() -> None:
    with pytest.raises(TooManyPatchOperations) as caught:
        patches.apply_json_patch(RUN, [{"op": "test", "path": "", "value": RUN}] * 10_001)
    assert str(caught.value) == (
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    )


def test_a_json_patch_that_is_not_a_list_is_malformed() -> None:
    with pytest.raises(MalformedPatch, match="JSON array of operations, got object"):
        patches.apply_json_patch(RUN, {"op": "add"})


def test_a_json_patch_that_replaces_the_document_with_a_non_object_is_refused() -> None:
    with pytest.raises(patches.PatchResultInvalid):
        patches.apply_json_patch(RUN, [{"op": "replace", "path": "", "value": [1]}])


def test_json_patch_operations_with_extra_members_are_reported_as_kube_strict_errors() -> None:
    operations = [{"op": "add", "path": "/a", "value": 1, "valeu": 2}]
    assert patches.json_patch_unknown_fields(operations) == ['json patch unknown field "[0].valeu"']


def test_a_plain_strategic_merge_patch_has_merge_patch_semantics() -> None:
    assert patches.apply_strategic_merge_patch(RUN, {"spec": {"replicas": 4}})["spec"] == {
        "replicas": 4,
        "canary": {"weight": 10},
        "list": [1, 2],
    }


@pytest.mark.parametrize(
    ("patch", "directive", "path"),
    [
        ({"$patch": "replace", "spec": {}}, "$patch", ""),
        ({"spec": {"$retainKeys": ["replicas"]}}, "$retainKeys", "spec"),
        ({"status": {"$setElementOrder/conditions": [{"type": "Ready"}]}}, None, "status"),
        ({"spec": {"list": [{"$patch": "delete", "name": "a"}]}}, "$patch", "spec.list[0]"),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, None, "metadata"),
    ],
)
def test_strategic_merge_directives_are_refused_naming_the_directive_and_its_place(
    patch: dict[str, Any], directive: str | None, path: str
) -> None:
    with pytest.raises(UnsupportedPatchDirective) as caught:
        patches.apply_strategic_merge_patch(RUN, patch)
    expected = directive or next(iter(next(iter(patch.values()))))
    assert caught.value.directive == expected
    assert caught.value.path == path
    assert repr(expected) in str(caught.value)


# --- properties ---------------------------------------------------------------------------

_scalars = st.one_of(
    st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
)
_keys = st.text(max_size=4)
# Documents without nulls: a merge patch cannot set a null, so the diff property needs none.
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12,
)
_objects = st.dictionaries(_keys, _documents, max_size=5)
_json = st.recursive(
    st.one_of(st.none(), _scalars),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12,
)


def _merge_diff(source: Any, target: Any) -> Any:
    """The merge patch turning `source` into `target` (an independent implementation)."""
    if not isinstance(source, dict) or not isinstance(target, dict):
        return target
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key not in source:
            patch[key] = value
        elif source[key] != value or type(source[key]) is not type(value):
            patch[key] = _merge_diff(source[key], value)
    return patch


@given(_objects, _objects)
def test_applying_the_merge_diff_of_two_documents_yields_the_target(
    source: dict[str, Any], target: dict[str, Any]
) -> None:
    assert patches.apply_merge_patch(source, _merge_diff(source, target)) == target


@given(_objects, st.data())
def test_a_null_in_a_merge_patch_deletes_the_member(
    document: dict[str, Any], data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from([*document, "absent"]))
    assert key not in patches.apply_merge_patch(document, {key: None})


@given(_objects, st.dictionaries(_keys, _json, max_size=4))
def test_merge_and_strategic_patches_never_mutate_their_inputs(
    document: dict[str, Any], patch: dict[str, Any]
) -> None:
    before = (copy.deepcopy(document), copy.deepcopy(patch))
    result = patches.apply_merge_patch(document, patch)
    if not any(True for _ in patches.find_strategic_directives(patch)):
        assert patches.apply_strategic_merge_patch(document, patch) == result
    assert (document, patch) == before


@given(_objects, _keys, _documents)
def test_a_json_patch_add_then_remove_restores_an_absent_member(
    document: dict[str, Any], key: str, value: Any
) -> None:
    document.pop(key, None)
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    added = patches.apply_json_patch(document, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert patches.apply_json_patch(added, [{"op": "remove", "path": pointer}]) == document


@given(_objects.filter(bool), st.data())
def test_a_json_patch_remove_then_add_back_restores_the_document(
    document: dict[str, Any], data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(document)))
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    operations = [
        {"op": "remove", "path": pointer},
        {"op": "add", "path": pointer, "value": copy.deepcopy(document[key])},
    ]
    before = copy.deepcopy(operations)
    assert patches.apply_json_patch(document, operations) == document
    assert operations == before


@given(_objects, _documents)
def test_a_json_patch_never_mutates_its_inputs_even_when_it_edits_its_own_values(
    document: dict[str, Any], value: Any
) -> None:
    operations = [
        {"op": "add", "path": "/fresh", "value": {"inner": value}},
        {"op": "add", "path": "/fresh/extra", "value": 1},
        {"op": "remove", "path": "/fresh/inner"},
    ]
    snapshot = (copy.deepcopy(document), copy.deepcopy(operations))
    patches.apply_json_patch(document, operations)
    assert (document, operations) == snapshot


_directives = st.one_of(
    st.sampled_from(["$patch", "$retainKeys"]),
    st.builds(lambda f: f"$setElementOrder/{f}", _keys),
    st.builds(lambda f: f"$deleteFromPrimitiveList/{f}", _keys),
)


@st.composite
def _patch_with_a_directive(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A patch with one directive planted at a random depth, inside objects or lists."""
    directive = draw(_directives)
    planted: Any = {directive: draw(_json), **draw(st.dictionaries(_keys, _json, max_size=2))}
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        if draw(st.booleans()):
            planted = [*draw(st.lists(_json, max_size=2)), planted]
        else:
            planted = {draw(_keys.filter(lambda k: not k.startswith("$"))): planted}
    if not isinstance(planted, dict):
        planted = {"spec": planted}
    return planted, directive


@given(_objects, _patch_with_a_directive())
def test_a_strategic_directive_anywhere_is_refused_and_nothing_is_applied(
    document: dict[str, Any], planted: tuple[dict[str, Any], str]
) -> None:
    patch, directive = planted
    before = copy.deepcopy(document)
    with pytest.raises(UnsupportedPatchDirective) as caught:
        patches.apply_strategic_merge_patch(document, patch)
    found = [name for name, _ in patches.find_strategic_directives(patch)]
    assert directive in found
    assert caught.value.directive == found[0]
    assert document == before
