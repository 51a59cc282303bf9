"""Bodies decode like kube's: duplicates and unknown fields found, errors worded as kube's."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.api.workflowruns import WorkflowRun
from plnt.registry import decoding, fieldcauses, fieldvalidation
from plnt.registry.decoding import DecodeError
from plnt.registry.fieldcauses import FieldCause

DIGEST = "sha256:" + "0" * 64


def _run(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "summarize", "labels": {"team": "a"}},
        "spec": {"workflow": {"ref": "oci-layout:summarize:1", "digest": DIGEST}, **spec},
    }


@pytest.mark.parametrize(
    "content_type",
    [
        "",
        "application/json",
        "application/json; charset=utf-8",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
    ],
)
def test_json_bodies_report_every_duplicate_key_with_its_path(content_type: str) -> None:
    body = b'{"bar":1,"spec":{"replicas":1,"replicas":2,"l":[{"x":1,"x":2}]},"bar":3}'
    value, duplicates = decoding.decode_body(body, content_type=content_type)
    assert value == {"bar": 3, "spec": {"replicas": 2, "l": [{"x": 2}]}}
    assert sorted(duplicates) == ["bar", "spec.l[0].x", "spec.replicas"]


@pytest.mark.parametrize("content_type", ["application/yaml", "application/apply-patch+yaml"])
def test_yaml_bodies_report_duplicates_and_read_scalars_as_kube_does(content_type: str) -> None:
    body = b"""
spec:
  replicas: 1
  replicas: 2
  list:
    - {x: 1, x: 2}
when: 2026-07-01T10:00:00Z
clock: 12:30
hex: 0x1f
flag: yes
1: one
"""
    value, duplicates = decoding.decode_body(body, content_type=content_type)
    assert value == {
        "spec": {"replicas": 2, "list": [{"x": 2}]},
        "when": "2026-07-01T10:00:00Z",
        "clock": "12:30",
        "hex": 31,
        "flag": True,
        "1": "one",
    }
    assert duplicates == ["spec.replicas", "spec.list[0].x"]


def test_yaml_merge_keys_overridden_by_the_mapping_are_not_duplicates() -> None:
    body = b"base: &b {a: 1, c: 3}\nderived:\n  <<: *b\n  a: 2\n"
    value, duplicates = decoding.decode_body(body, content_type="application/yaml")
    assert value["derived"] == {"a": 2, "c": 3}
    assert duplicates == []


@pytest.mark.parametrize(
    ("body", "content_type", "fragment"),
    [
        (b'{"a":', "application/json", "at line 1, column 6 (char 5): Expecting value"),
        (b'{"a":1}\n{', "application/json", "line 2, column 1"),
        (b"NaN", "application/json", "NaN is not a JSON value"),
        (b"[1e999]", "application/json", "out of range"),
        (b"\xff{}", "application/json", "invalid UTF-8 at byte 0"),
        (b"[" * 100_000, "application/json", "exceeded max depth of 100"),
        (b"a: [", "application/yaml", "malformed YAML at line 1, column 5"),
        (b"a: b: c", "application/yaml", "mapping values are not allowed here"),
        (b"a: &x [*x]", "application/yaml", "recursive alias"),
        (b"a: .inf", "application/yaml", "is not JSON"),
        (b"? [1]\n: 2", "application/yaml", "a mapping key must be a scalar"),
        (b"--- 1\n--- 2", "application/yaml", "another document"),
    ],
)
def test_malformed_bodies_fail_with_a_decode_error_giving_the_position_or_reason(
    body: bytes, content_type: str, fragment: str
) -> None:
    with pytest.raises(DecodeError) as caught:
        decoding.decode_body(body, content_type=content_type)
    assert fragment in str(caught.value)


def test_a_yaml_alias_bomb_is_refused_instead_of_expanded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(DecodeError, match="document contains excessive aliasing"):
        decoding.decode_body("\n".join(lines).encode(), content_type="application/yaml")


def test_other_media_types_are_unsupported_not_malformed() -> None:
    with pytest.raises(decoding.UnsupportedContentType):
        decoding.decode_body(b"{}", content_type="application/vnd.kubernetes.protobuf")


def test_unknown_fields_are_found_by_wire_name_at_every_depth() -> None:
    run = _run(foo=1, gpu_class="a100", canary={"smoke": {"input": {"free": 1}, "bar": 2}})
    run["metadata"]["bogus"] = True
    run["status"] = {"history": [{"revision": 1, "digest": DIGEST, "x": 1}]}
    assert fieldvalidation.unknown_fields(WorkflowRun, run) == [
        "metadata.bogus",
        "spec.foo",
        "spec.gpu_class",
        "spec.canary.smoke.bar",
        "status.history[0].x",
    ]
    cleaned = fieldvalidation.drop_unknown_fields(WorkflowRun, run)
    assert fieldvalidation.unknown_fields(WorkflowRun, cleaned) == []
    assert cleaned["spec"]["canary"]["smoke"] == {"input": {"free": 1}}
    WorkflowRun.model_validate(cleaned)
    assert run["spec"]["foo"] == 1  # the input is left alone


def test_strict_messages_use_kubes_words() -> None:
    text = fieldvalidation.strict_error_message("WorkflowRun", ["spec.foo"], ["bar"])
    assert text == 'strict decoding error: unknown field "spec.foo", duplicate field "bar"'
    assert fieldvalidation.cannot_handle_message("WorkflowRun", text) == (
        'WorkflowRun in version "v1" cannot be handled as a WorkflowRun: ' + text
    )
    assert fieldvalidation.strict_warnings(["spec.foo"], ["bar"]) == [
        'unknown field "spec.foo"',
        'duplicate field "bar"',
    ]


def test_a_warning_header_escapes_quotes_and_backslashes_and_cuts_at_256_runes() -> None:
    assert fieldvalidation.warning_header_value('unknown field "spec.foo"') == (
        '299 - "unknown field \\"spec.foo\\""'
    )
    assert fieldvalidation.warning_header_value("a\\b\nc") == '299 - "a\\\\b c"'
    assert fieldvalidation.warning_header_value("é" * 300) == '299 - "' + "é" * 256 + '"'


def test_warning_headers_are_cut_only_once_their_total_passes_4096_runes() -> None:
    short = [f"w{i}" for i in range(3)]
    assert fieldvalidation.warning_header_values([*short, "w0", ""]) == [
        f'299 - "{text}"' for text in short
    ]
    long = [str(i) * 1000 for i in range(6)]
    headers = fieldvalidation.warning_header_values(long)
    assert all(len(header) == len('299 - ""') + 256 for header in headers)
    assert len(headers) == 6


def _causes(data: dict[str, Any]) -> list[FieldCause]:
    with pytest.raises(pydantic.ValidationError) as caught:
        WorkflowRun.model_validate(data)
    return fieldcauses.validation_causes(caught.value, model=WorkflowRun)


def test_validation_errors_become_kube_field_causes() -> None:
    run = _run(replicas=-1, target="moon", canary={"weight": "heavy"})
    run["spec"]["workflow"] = {"ref": "", "digest": "md5:x"}
    run["status"] = {"history": [{"digest": DIGEST}]}
    assert _causes(run) == [
        FieldCause("spec.workflow.ref", "FieldValueRequired", "Required value"),
        FieldCause(
            "spec.workflow.digest",
            "FieldValueInvalid",
            "Invalid value: \"md5:x\": must match the regular expression '^sha256:[0-9a-f]{64}$'",
        ),
        FieldCause(
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        FieldCause(
            "spec.target",
            "FieldValueNotSupported",
            'Unsupported value: "moon": supported values: "local", "kubernetes"',
        ),
        FieldCause(
            "spec.canary.weight",
            "FieldValueTypeInvalid",
            'Invalid value: "string": spec.canary.weight in body must be of type integer: "string"',
        ),
        FieldCause("status.history[0].revision", "FieldValueRequired", "Required value"),
    ]


def test_a_missing_spec_is_required_and_the_root_prefixes_paths() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        WorkflowRun.model_validate({"metadata": {"name": "x"}})
    assert fieldcauses.validation_causes(caught.value) == [
        FieldCause("spec", "FieldValueRequired", "Required value")
    ]
    assert fieldcauses.validation_causes(caught.value, root="object")[0].field == "object.spec"


def test_an_invalid_message_lists_every_cause_as_kube_does() -> None:
    one = [FieldCause("spec.replicas", "FieldValueInvalid", "Invalid value: -1: bad")]
    assert fieldcauses.invalid_message("WorkflowRun.plnt.work", "x", one) == (
        'WorkflowRun.plnt.work "x" is invalid: spec.replicas: Invalid value: -1: bad'
    )
    two = [*one, FieldCause("spec", "FieldValueRequired", "Required value")]
    assert fieldcauses.invalid_message("WorkflowRun.plnt.work", "x", two).endswith(
        "is invalid: [spec.replicas: Invalid value: -1: bad, spec: Required value]"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "true"), (-1, "-1"), (0.5, "0.5"), (1e6, "1e+06"), ('a"b', '"a\\"b"'), ([1], "[1]")],
)
def test_bad_values_print_as_go_prints_them(value: Any, shown: str) -> None:
    assert fieldcauses.go_value(value) == shown


# --- properties ---------------------------------------------------------------------------

_keys = st.text(alphabet="abcxyz", min_size=1, max_size=3)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=10,
)


def _render(value: Any, duplicates: list[str], path: str, data: st.DataObject) -> str:
    """JSON text for `value`, repeating some keys (first with another value) and noting them."""
    if isinstance(value, list):
        items = [_render(item, duplicates, f"{path}[{i}]", data) for i, item in enumerate(value)]
        return "[" + ",".join(items) + "]"
    if not isinstance(value, dict):
        return json.dumps(value)
    members = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if data.draw(st.booleans()):
            members.append(f"{json.dumps(key)}:{json.dumps('earlier')}")
            duplicates.append(where)
        members.append(f"{json.dumps(key)}:{_render(item, duplicates, where, data)}")
    return "{" + ",".join(members) + "}"


@given(_json, st.data())
def test_every_planted_duplicate_is_found_and_the_last_value_wins(
    value: Any, data: st.DataObject
) -> None:
    planted: list[str] = []
    text = _render(value, planted, "", data)
    decoded, found = decoding.decode_body(text.encode(), content_type="application/json")
    assert decoded == value
    assert sorted(found) == sorted(planted)
    yaml_decoded, yaml_found = decoding.decode_body(text.encode(), content_type="application/yaml")
    assert yaml_decoded == value
    assert sorted(yaml_found) == sorted(planted)


@st.composite
def _run_with_strays(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A valid WorkflowRun document with unknown fields planted at declared-model depths."""
    run = _run(
        canary={"weight": 5, "smoke": {"input": {"free": draw(_json)}}, "analysis": {}},
        cache={"enabled": True},
    )
    run["status"] = {"history": [{"revision": 1, "digest": DIGEST}], "conditions": []}
    spots = {
        "": run,
        "metadata": run["metadata"],
        "spec": run["spec"],
        "spec.workflow": run["spec"]["workflow"],
        "spec.canary": run["spec"]["canary"],
        "spec.canary.smoke": run["spec"]["canary"]["smoke"],
        "spec.canary.analysis": run["spec"]["canary"]["analysis"],
        "spec.cache": run["spec"]["cache"],
        "status": run["status"],
        "status.history[0]": run["status"]["history"][0],
    }
    planted = []
    for path in draw(st.lists(st.sampled_from(sorted(spots)), unique=True)):
        name = "zz" + draw(_keys)
        spots[path][name] = draw(_json)
        planted.append(f"{path}.{name}" if path else name)
    return run, planted


@given(_run_with_strays())
def test_unknown_fields_planted_anywhere_are_found_and_dropping_them_validates(
    case: tuple[dict[str, Any], list[str]],
) -> None:
    run, planted = case
    assert sorted(fieldvalidation.unknown_fields(WorkflowRun, run)) == sorted(planted)
    cleaned = fieldvalidation.drop_unknown_fields(WorkflowRun, run)
    assert fieldvalidation.unknown_fields(WorkflowRun, cleaned) == []
    WorkflowRun.model_validate(cleaned)


@given(st.binary(max_size=60), st.sampled_from(["application/json", "application/yaml"]))
def test_arbitrary_bytes_decode_or_fail_only_with_decode_error(
    body: bytes, content_type: str
) -> None:
    try:
        value, duplicates = decoding.decode_body(body, content_type=content_type)
    except DecodeError as error:
        assert str(error)
    else:
        json.dumps(value, allow_nan=False)
        assert isinstance(duplicates, list)
