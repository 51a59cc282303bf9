"""ObjectMeta admission rule by rule, each with kube's status code, field path and message.

One bad input per rule of apimachinery's ObjectMeta validation (names, namespace,
labels, annotations, ownerReferences, finalizers, managedFields, what an update may
not change), of decoding metadata into metav1.ObjectMeta (400), and of the structural
schema's type check (422), run through the same admission steps the store runs.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from plnt.api import errors
from plnt.registry import admitting, metadecoding, metavalidation
from plnt.registry.definitions import Object
from plnt.registry.options import WriteOptions
from plnt.registry.workflowruns.definition import DEFINITION

DIGEST = "sha256:" + "ab" * 32
NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
    "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
CANNOT_HANDLE = 'WorkflowRun in version "v1" cannot be handled as a WorkflowRun: '


def run(**meta: Any) -> Object:
    body: Object = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "r", **meta},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}},
    }
    for key in [k for k, v in body["metadata"].items() if v is None]:
        del body["metadata"][key]
    return body


def owner(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-1", **fields}


def create(body: Object, *, namespace: str = "default") -> tuple[Object, list[str]]:
    """The store's admission of a create, in its order; raises the API error it would."""
    obj = copy.deepcopy(body)
    admitting.check_identity(DEFINITION, obj, namespace=namespace, name=None)
    obj, _ = admitting.field_validation(DEFINITION, obj, WriteOptions())
    meta = obj["metadata"]
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + "x7k2p"
    DEFINITION.strategy.prepare_for_create(obj)
    meta["uid"], meta["creationTimestamp"] = "uid-1", "2026-01-02T03:04:05Z"
    return obj, admitting.validate(DEFINITION, obj, None)


def stored() -> Object:
    obj, _ = create(run())
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def update(change: dict[str, Any], *, old: Object | None = None, patch: bool = False) -> Object:
    """The store's admission of an update of `old` whose metadata gets `change`."""
    old = old if old is not None else stored()
    new = copy.deepcopy(old)
    new["metadata"].update(change)
    for key in [k for k, v in change.items() if v is None]:
        del new["metadata"][key]
    admitting.check_identity(DEFINITION, new, namespace="default", name="r", is_patch=patch)
    DEFINITION.strategy.prepare_for_update(new, old)
    admitting.validate(DEFINITION, new, old)
    return new


def refusal(action: Any) -> errors.APIError:
    with pytest.raises(errors.APIError) as caught:
        action()
    return caught.value


# --- ValidateObjectMeta on create: (metadata, field, message), each a 422 ---------------------

GO_OWNER = (
    'v1.OwnerReference{APIVersion:"v1", Kind:"Event", Name:"e", UID:"u-1", '
    "Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}"
)
CREATE_RULES: list[tuple[str, dict[str, Any], str, str]] = [
    ("name-not-subdomain", {"name": "Bad_Name"}, "metadata.name", f'"Bad_Name": {SUBDOMAIN}'),
    (
        "name-too-long",
        {"name": "a" * 254},
        "metadata.name",
        f'"{"a" * 254}": must be no more than 253 characters',
    ),
    (
        "generate-name-not-subdomain",
        {"name": None, "generateName": "Bad-"},
        "metadata.generateName",
        f'"Bad-": {SUBDOMAIN}',
    ),
    ("label-key", {"labels": {"a b": "x"}}, "metadata.labels", f'"a b": {NAME_PART}'),
    (
        "label-key-prefix",
        {"labels": {"Example.com/a": "x"}},
        "metadata.labels",
        f'"Example.com/a": prefix part {SUBDOMAIN}',
    ),
    (
        "label-key-two-slashes",
        {"labels": {"a/b/c": "x"}},
        "metadata.labels",
        "\"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or "
        "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
        "'/' (e.g. 'example.com/MyName')",
    ),
    (
        "label-key-name-too-long",
        {"labels": {"a" * 64: "x"}},
        "metadata.labels",
        f'"{"a" * 64}": name part must be no more than 63 bytes',
    ),
    ("label-value", {"labels": {"a": "x y"}}, "metadata.labels", f'"x y": {LABEL_VALUE}'),
    (
        "label-value-too-long",
        {"labels": {"a": "v" * 64}},
        "metadata.labels",
        f'"{"v" * 64}": must be no more than 63 bytes',
    ),
    ("annotation-key", {"annotations": {"-x": "y"}}, "metadata.annotations", f'"-x": {NAME_PART}'),
    (
        "owner-api-version",
        {"ownerReferences": [owner(apiVersion="")]},
        "metadata.ownerReferences.apiVersion",
        '"": version must not be empty',
    ),
    (
        "owner-api-version-without-version",
        {"ownerReferences": [owner(apiVersion="apps/")]},
        "metadata.ownerReferences.apiVersion",
        '"apps/": version must not be empty',
    ),
    (
        "owner-kind",
        {"ownerReferences": [owner(kind="")]},
        "metadata.ownerReferences.kind",
        '"": must not be empty',
    ),
    (
        "owner-name",
        {"ownerReferences": [owner(name="")]},
        "metadata.ownerReferences.name",
        '"": must not be empty',
    ),
    (
        "owner-uid",
        {"ownerReferences": [owner(uid="")]},
        "metadata.ownerReferences.uid",
        '"": must not be empty',
    ),
    (
        "owner-event",
        {"ownerReferences": [owner(kind="Event", name="e")]},
        "metadata.ownerReferences",
        f"{GO_OWNER}: /v1, Kind=Event is disallowed from being an owner",
    ),
    ("finalizer-name", {"finalizers": ["a b"]}, "metadata.finalizers", f'"a b": {NAME_PART}'),
    (
        "finalizers-orphan-and-foreground",
        {"finalizers": ["orphan", "foregroundDeletion"]},
        "metadata.finalizers",
        '[]string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion '
        "cannot be both set",
    ),
]


@pytest.mark.parametrize(
    ("meta", "field", "message"),
    [case[1:] for case in CREATE_RULES],
    ids=[case[0] for case in CREATE_RULES],
)
def test_each_objectmeta_rule_refuses_a_create_with_kubes_field_and_message(
    meta: dict[str, Any], field: str, message: str
) -> None:
    error = refusal(lambda: create(run(**meta)))
    assert error.code == 422 and error.reason == "Invalid"
    first = error.causes[0]
    assert (first.field, first.message) == (field, f"Invalid value: {message}")
    assert first.reason == "FieldValueInvalid"
    assert f"{field}: Invalid value: {message}" in error.message


def test_a_missing_name_is_required_naming_generate_name_too() -> None:
    error = refusal(lambda: create(run(name=None)))
    assert error.causes[0] == errors.Cause(
        "FieldValueRequired", "Required value: name or generateName is required", "metadata.name"
    )


def test_a_namespace_that_is_not_a_dns_label_is_refused() -> None:
    error = refusal(lambda: create(run(), namespace="Team_A"))
    assert error.causes[0] == errors.Cause(
        "FieldValueInvalid", f'Invalid value: "Team_A": {DNS_LABEL}', "metadata.namespace"
    )
    dotted = metavalidation.validate_create({"name": "r", "namespace": "a.b"}, namespaced=True)
    assert dotted[0].message == 'Invalid value: "a.b": must not contain dots'


def test_annotations_over_256_kib_in_all_are_too_long_counting_keys_and_values() -> None:
    limit = metavalidation.TOTAL_ANNOTATION_SIZE_LIMIT_B
    at_limit = {"a": "x" * (limit - 1)}
    create(run(annotations=at_limit))
    error = refusal(lambda: create(run(annotations={"ab": "x" * (limit - 1)})))
    assert error.causes == (
        errors.Cause(
            "FieldValueTooLong",
            "Too long: may not be more than 262144 bytes",
            "metadata.annotations",
        ),
    )
    assert error.message.endswith(
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    )


def test_annotation_keys_are_qualified_names_in_any_case() -> None:
    created, _ = create(run(annotations={"Example.COM/Key": "v"}))
    assert created["metadata"]["annotations"] == {"Example.COM/Key": "v"}


def test_only_one_owner_reference_may_be_the_controller() -> None:
    first, second = owner(controller=True), owner(kind="Secret", name="s", controller=True)
    error = refusal(lambda: create(run(ownerReferences=[first, second])))
    (cause,) = error.causes
    assert cause.field == "metadata.ownerReferences"
    assert cause.message.startswith("Invalid value: []v1.OwnerReference{v1.OwnerReference{")
    assert cause.message.endswith(
        ': Only one reference can have Controller set to true. Found "true" in references for '
        "ConfigMap/c and Secret/s"
    )


def test_every_violation_is_reported_at_once() -> None:
    error = refusal(
        lambda: create(run(labels={"a b": "x y"}, finalizers=["-"], ownerReferences=[{}]))
    )
    fields = [c.field for c in error.causes]
    assert fields == [
        "metadata.labels",
        "metadata.labels",
        "metadata.ownerReferences.apiVersion",
        "metadata.ownerReferences.kind",
        "metadata.ownerReferences.name",
        "metadata.ownerReferences.uid",
        "metadata.finalizers",
    ]
    assert error.message.startswith('WorkflowRun.plnt.work "r" is invalid: [metadata.labels: ')


def test_a_finalizer_without_a_domain_is_admitted_with_kubes_warning() -> None:
    _, warnings = create(run(finalizers=["cleanup", "example.com/keep"]))
    assert warnings == [
        'metadata.finalizers: "cleanup": prefer a domain-qualified finalizer name including a '
        "path (/) to avoid accidental conflicts with other finalizer writers"
    ]


# --- rules the API's own resets keep from being reached, checked directly ---------------------


def test_a_negative_generation_and_a_namespace_on_a_cluster_scoped_object_are_refused() -> None:
    causes = metavalidation.validate_create(
        {"name": "n", "namespace": "x", "generation": -1}, namespaced=False
    )
    assert causes == [
        errors.Cause(
            "FieldValueForbidden", "Forbidden: not allowed on this type", "metadata.namespace"
        ),
        errors.Cause(
            "FieldValueInvalid",
            "Invalid value: -1: must be greater than or equal to 0",
            "metadata.generation",
        ),
    ]


MANAGED_FIELDS_RULES: list[tuple[str, dict[str, Any], errors.Cause]] = [
    (
        "operation",
        {"operation": "Replace"},
        errors.Cause(
            "FieldValueInvalid",
            'Invalid value: "Replace": must be `Apply` or `Update`',
            "metadata.managedFields[0].operation",
        ),
    ),
    (
        "fields-type",
        {"fieldsType": "FieldsV2"},
        errors.Cause(
            "FieldValueInvalid",
            'Invalid value: "FieldsV2": must be `FieldsV1`',
            "metadata.managedFields[0].fieldsType",
        ),
    ),
    (
        "manager-too-long",
        {"manager": "m" * 129},
        errors.Cause(
            "FieldValueTooLong",
            "Too long: may not be more than 128 bytes",
            "metadata.managedFields[0].manager",
        ),
    ),
    (
        "manager-unprintable",
        {"manager": "ab\x07"},
        errors.Cause(
            "FieldValueInvalid",
            'Invalid value: "ab\\a": invalid character U+0007 (at position 2)',
            "metadata.managedFields[0].manager",
        ),
    ),
    (
        "subresource-too-long",
        {"subresource": "s" * 257},
        errors.Cause(
            "FieldValueTooLong",
            "Too long: may not be more than 256 bytes",
            "metadata.managedFields[0].subresource",
        ),
    ),
]


@pytest.mark.parametrize(
    ("entry", "cause"),
    [case[1:] for case in MANAGED_FIELDS_RULES],
    ids=[case[0] for case in MANAGED_FIELDS_RULES],
)
def test_each_managed_fields_rule_names_the_entry(
    entry: dict[str, Any], cause: errors.Cause
) -> None:
    valid = {"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1"}
    assert metavalidation.managed_fields_causes([valid]) == []
    assert metavalidation.managed_fields_causes([{**valid, **entry}]) == [cause]


# --- ValidateObjectMetaUpdate ------------------------------------------------------------------


def test_changing_the_uid_is_refused_as_immutable_not_reverted() -> None:
    error = refusal(lambda: update({"uid": "other"}))
    assert error.code == 422
    assert error.causes == (
        errors.Cause(
            "FieldValueInvalid", 'Invalid value: "other": field is immutable', "metadata.uid"
        ),
    )
    assert error.message == (
        'WorkflowRun.plnt.work "r" is invalid: metadata.uid: Invalid value: "other": '
        "field is immutable"
    )


def test_an_update_without_uid_or_with_another_creation_time_keeps_the_stored_ones() -> None:
    new = update({"uid": None, "creationTimestamp": "2001-01-01T00:00:00Z"})
    assert new["metadata"]["uid"] == "uid-1"
    assert new["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"


def test_setting_a_deletion_timestamp_by_update_is_refused() -> None:
    error = refusal(lambda: update({"deletionTimestamp": "2001-01-01T00:00:00Z"}))
    assert error.causes == (
        errors.Cause(
            "FieldValueInvalid",
            # Go prints a *metav1.Time through its String(), unquoted
            "Invalid value: 2001-01-01 00:00:00 +0000 UTC: field is immutable",
            "metadata.deletionTimestamp",
        ),
    )


def deleting() -> Object:
    old = stored()
    old["metadata"].update(
        deletionTimestamp="2026-01-02T03:05:00Z",
        deletionGracePeriodSeconds=0,
        finalizers=["example.com/a"],
    )
    return old


def test_a_grace_period_once_set_may_not_change() -> None:
    error = refusal(lambda: update({"deletionGracePeriodSeconds": 30}, old=deleting()))
    assert error.causes == (
        errors.Cause(
            "FieldValueInvalid",
            "Invalid value: 30: field is immutable",
            "metadata.deletionGracePeriodSeconds",
        ),
    )


def test_no_finalizer_may_be_added_while_the_object_is_being_deleted() -> None:
    error = refusal(
        lambda: update({"finalizers": ["example.com/a", "example.com/b"]}, old=deleting())
    )
    assert error.causes == (
        errors.Cause(
            "FieldValueForbidden",
            "Forbidden: no new finalizers can be added if the object is being deleted, found "
            'new finalizers []string{"example.com/b"}',
            "metadata.finalizers",
        ),
    )
    removed = update({"finalizers": []}, old=deleting())
    assert removed["metadata"]["finalizers"] == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"name": "other"},
            "the name of the object (other) does not match the name on the URL (r)",
        ),
        (
            {"namespace": "other"},
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
    ],
)
def test_a_changed_name_or_namespace_is_a_bad_request(change: dict[str, Any], message: str) -> None:
    error = refusal(lambda: update(change))
    assert (error.code, error.message) == (400, message)


def test_update_only_rules_checked_directly() -> None:
    old = {"name": "r", "namespace": "default", "uid": "u", "generation": 3, "resourceVersion": "9"}
    new = {**old, "generation": 2, "resourceVersion": "", "generateName": "a/b"}
    causes = metavalidation.validate_update(new, old, namespaced=True)
    assert [(c.field, c.message) for c in causes] == [
        ("metadata.generateName", "Invalid value: \"a/b\": may not contain '/'"),
        ("metadata.resourceVersion", 'Invalid value: "": must be specified for an update'),
        ("metadata.generation", "Invalid value: 2: must not be decremented"),
    ]
    assert metavalidation.path_segment_name("..", False) == ["may not be '..'"]


def test_labels_are_validated_on_update_too() -> None:
    error = refusal(lambda: update({"labels": {"a": "x y"}}))
    assert error.causes[0].message == f'Invalid value: "x y": {LABEL_VALUE}'


# --- decoding into metav1.ObjectMeta: (metadata, Go's error), each a 400 -----------------------

DECODE_RULES: list[tuple[str, dict[str, Any], str]] = [
    (
        "label-value-number",
        {"labels": {"a": 5}},
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type "
        "string",
    ),
    (
        "labels-array",
        {"labels": ["a"]},
        "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
        "map[string]string",
    ),
    (
        "annotation-value-bool",
        {"annotations": {"a": True}},
        "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.annotations of "
        "type string",
    ),
    (
        "owner-reference-string",
        {"ownerReferences": ["x"]},
        "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences "
        "of type v1.OwnerReference",
    ),
    (
        "owner-reference-uid-number",
        {"ownerReferences": [owner(uid=5)]},
        "json: cannot unmarshal number into Go struct field "
        "OwnerReference.metadata.ownerReferences.uid of type types.UID",
    ),
    (
        "owner-reference-controller-string",
        {"ownerReferences": [owner(controller="yes")]},
        "json: cannot unmarshal string into Go struct field "
        "OwnerReference.metadata.ownerReferences.controller of type bool",
    ),
    (
        "finalizer-number",
        {"finalizers": ["example.com/a", 5]},
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.finalizers of "
        "type string",
    ),
    (
        "name-number",
        {"name": 5},
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type "
        "string",
    ),
    (
        "generation-fraction",
        {"generation": 1.5},
        "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.metadata.generation "
        "of type int64",
    ),
    (
        "creation-timestamp-number",
        {"creationTimestamp": 5},
        "json: cannot unmarshal number into Go struct field "
        "ObjectMeta.metadata.creationTimestamp of type string",
    ),
    (
        "creation-timestamp-format",
        {"creationTimestamp": "2026/01/02"},
        'parsing time "2026/01/02" as "2006-01-02T15:04:05Z07:00": cannot parse "/01/02" as "-"',
    ),
    (
        "managed-fields-object",
        {"managedFields": {"manager": "m"}},
        "json: cannot unmarshal object into Go struct field ObjectMeta.metadata.managedFields "
        "of type []v1.ManagedFieldsEntry",
    ),
]


@pytest.mark.parametrize(
    ("meta", "problem"),
    [case[1:] for case in DECODE_RULES],
    ids=[case[0] for case in DECODE_RULES],
)
def test_metadata_of_the_wrong_json_type_is_a_bad_request_as_go_decodes_it(
    meta: dict[str, Any], problem: str
) -> None:
    error = refusal(lambda: create(run(**meta)))
    assert (error.code, error.reason) == (400, "BadRequest")
    assert error.message == CANNOT_HANDLE + problem


def test_metadata_that_is_not_an_object_is_a_bad_request() -> None:
    body = run()
    body["metadata"] = "r"
    error = refusal(lambda: create(body))
    assert error.message == CANNOT_HANDLE + (
        "json: cannot unmarshal string into Go struct field WorkflowRun.metadata of type "
        "v1.ObjectMeta"
    )


def test_the_first_type_error_in_document_order_is_the_one_told() -> None:
    problem = metadecoding.decode_error({"finalizers": [1], "labels": {"a": 2}}, kind="WorkflowRun")
    assert problem is not None and "metadata.finalizers" in problem


def test_nulls_leave_fields_unset_as_go_does() -> None:
    assert (
        metadecoding.decode_error(
            {"labels": {"a": None}, "ownerReferences": None, "generation": None}, kind="X"
        )
        is None
    )


def test_a_patch_whose_result_cannot_be_decoded_is_invalid_naming_patch() -> None:
    error = refusal(lambda: update({"labels": {"a": 5}}, patch=True))
    assert (error.code, error.reason) == (422, "Invalid")
    assert error.causes == (
        errors.Cause(
            "FieldValueInvalid",
            'Invalid value: "...": json: cannot unmarshal number into Go struct field '
            "ObjectMeta.metadata.labels of type string",
            "patch",
        ),
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2026-01-02T03:04:05Z", None),
        ("2026-01-02T03:04:05.123+02:00", None),
        ("2026-13-02T03:04:05Z", 'parsing time "2026-13-02T03:04:05Z": month out of range'),
        ("2026-02-30T03:04:05Z", 'parsing time "2026-02-30T03:04:05Z": day out of range'),
        (
            "2026-01-02T03:04:05",
            'parsing time "2026-01-02T03:04:05" as "2006-01-02T15:04:05Z07:00": cannot parse "" '
            'as "Z07:00"',
        ),
        ("2026-01-02T03:04:05Zx", 'parsing time "2026-01-02T03:04:05Zx": extra text: "x"'),
    ],
)
def test_times_parse_as_go_parses_rfc3339(text: str, problem: str | None) -> None:
    assert metadecoding.rfc3339_error(text) == problem


# --- the structural schema's types: 422 naming the field ---------------------------------------

SCHEMA_TYPES: list[tuple[str, Any, str, str]] = [
    ("replicas-boolean", {"replicas": True}, "spec.replicas", 'integer: "boolean"'),
    ("replicas-string", {"replicas": "3"}, "spec.replicas", 'integer: "string"'),
    ("replicas-fraction", {"replicas": 1.5}, "spec.replicas", 'integer: "number"'),
    ("canary-array", {"canary": []}, "spec.canary", 'object: "array"'),
    (
        "cache-enabled-string",
        {"cache": {"enabled": "yes"}},
        "spec.cache.enabled",
        'boolean: "string"',
    ),
]


@pytest.mark.parametrize(
    ("spec", "field", "expected"),
    [case[1:] for case in SCHEMA_TYPES],
    ids=[case[0] for case in SCHEMA_TYPES],
)
def test_a_wrong_type_in_the_body_is_invalid_as_a_structural_schema_says(
    spec: dict[str, Any], field: str, expected: str
) -> None:
    body = run()
    body["spec"].update(spec)
    error = refusal(lambda: create(body))
    actual = expected.split(": ")[1]
    assert error.code == 422
    assert error.causes[0] == errors.Cause(
        "FieldValueTypeInvalid",
        f"Invalid value: {actual}: {field} in body must be of type {expected}",
        field,
    )


def test_an_integral_number_is_an_integer_and_is_stored_as_one() -> None:
    body = run()
    body["spec"]["replicas"] = 3.0
    created, _ = create(body)
    assert created["spec"]["replicas"] == 3 and isinstance(created["spec"]["replicas"], int)
