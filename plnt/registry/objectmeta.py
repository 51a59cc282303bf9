"""ObjectMeta admitted as kube-apiserver admits a custom resource's: decoded, reset, validated.

kube handles `metadata` in three steps, and so does plnt:

1. **Decoding** (`decode_error`). Whatever the kind, metadata is decoded into Go's
   `metav1.ObjectMeta`; a value of the wrong JSON type stops the request there,
   with the text of Go's encoding/json (`json: cannot unmarshal number into Go
   struct field ObjectMeta.metadata.labels of type string`). A POST or PUT body
   gets it as a 400 (`WorkflowRun in version "v1" cannot be handled as a
   WorkflowRun: ...`); the result of a patch as a 422 naming `patch`, as kube's
   patcher reports a patched object it cannot decode. Nulls leave a field
   unset, unknown fields are `fieldvalidation`'s business, the first error in
   document order is the one reported (as Go's decoder does).
2. **Resets** (`prepare_update`): what `rest.BeforeUpdate` silently keeps from the
   stored object: the uid when none is sent, creationTimestamp always, a
   deletionTimestamp or grace period once set. Changing the uid is then refused
   by step 3, not reverted.
3. **Validation** (`validate_create`, `validate_update`): apimachinery's
   ValidateObjectMetaAccessor and ValidateObjectMetaAccessorUpdate rule by rule,
   with a custom resource's name rule (NameIsDNSSubdomain) unless a strategy
   supplies another: generateName, name, namespace, generation, labels,
   annotations (keys and the 256 KiB total), ownerReferences (apiVersion, kind,
   name and uid required, Event never an owner, at most one controller),
   finalizers (qualified names, not both orphan and foregroundDeletion, none
   added while deleting), managedFields (operation, fieldsType, manager,
   subresource), and on update the immutable name, namespace, uid,
   creationTimestamp, deletionTimestamp and deletionGracePeriodSeconds. Every
   violation is a metav1 cause with kube's field path (kube names
   `metadata.finalizers` and `metadata.ownerReferences.uid` without an index)
   and kube's message; values print as Go's field errors print them, except
   that a pointer inside a printed struct shows its value where Go shows an
   address.

`finalizer_warnings` are the warnings kube gives a custom resource for finalizer
names without a domain prefix. No I/O here; the only exceptions are the API
errors the store raises from these answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from plnt.api.errors import Cause
from plnt.registry import labelnames
from plnt.registry.labelnames import go_json_type, go_quote

TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * (1 << 10)
"""kube's TotalAnnotationSizeLimitB: keys plus values, in bytes."""

FIELD_IMMUTABLE = "field is immutable"
FIELD_MANAGER_MAX_LENGTH = 128
MAX_SUBRESOURCE_NAME_LENGTH = 256
NON_NEGATIVE = "must be greater than or equal to 0"
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"

NameRule = Callable[[str, bool], list[str]]
"""kube's ValidateNameFunc: why `name` (a generateName prefix when True) is not valid."""

# --- 1. decoding into metav1.ObjectMeta ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scalar:
    go_type: str  # string, types.UID, int64, bool, ...


@dataclass(frozen=True, slots=True)
class _Time:
    """metav1.Time: a JSON string in RFC 3339, or null."""


@dataclass(frozen=True, slots=True)
class _StringMap:
    """map[string]string (labels, annotations)."""


@dataclass(frozen=True, slots=True)
class _Raw:
    """A field Go keeps as raw JSON (FieldsV1): any value decodes."""


@dataclass(frozen=True, slots=True)
class _List:
    item: _Type
    item_go_type: str


@dataclass(frozen=True, slots=True)
class _Struct:
    name: str  # OwnerReference
    go_type: str  # v1.OwnerReference
    fields: Mapping[str, _Type]


_Type = _Scalar | _Time | _StringMap | _Raw | _List | _Struct

_STRING, _UID, _INT64, _BOOL = (
    _Scalar("string"),
    _Scalar("types.UID"),
    _Scalar("int64"),
    _Scalar("bool"),
)
_OWNER_REFERENCE = _Struct(
    "OwnerReference",
    "v1.OwnerReference",
    {
        "apiVersion": _STRING,
        "kind": _STRING,
        "name": _STRING,
        "uid": _UID,
        "controller": _BOOL,
        "blockOwnerDeletion": _BOOL,
    },
)
_MANAGED_FIELDS_ENTRY = _Struct(
    "ManagedFieldsEntry",
    "v1.ManagedFieldsEntry",
    {
        "manager": _STRING,
        "operation": _Scalar("v1.ManagedFieldsOperationType"),
        "apiVersion": _STRING,
        "time": _Time(),
        "fieldsType": _STRING,
        "fieldsV1": _Raw(),
        "subresource": _STRING,
    },
)
OBJECT_META = _Struct(
    "ObjectMeta",
    "v1.ObjectMeta",
    {
        "name": _STRING,
        "generateName": _STRING,
        "namespace": _STRING,
        "selfLink": _STRING,
        "uid": _UID,
        "resourceVersion": _STRING,
        "generation": _INT64,
        "creationTimestamp": _Time(),
        "deletionTimestamp": _Time(),
        "deletionGracePeriodSeconds": _INT64,
        "labels": _StringMap(),
        "annotations": _StringMap(),
        "ownerReferences": _List(_OWNER_REFERENCE, "v1.OwnerReference"),
        "finalizers": _List(_STRING, "string"),
        "managedFields": _List(_MANAGED_FIELDS_ENTRY, "v1.ManagedFieldsEntry"),
    },
)

_INT64_RANGE = (-(2**63), 2**63 - 1)


class _Mismatch(Exception):
    """The first error of a decode; `text` is what Go's decoder says."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _type_error(value: Any, struct: str, path: str, go_type: str) -> _Mismatch:
    return _Mismatch(
        f"json: cannot unmarshal {go_json_type(value)} into Go struct field "
        f"{struct}.{path} of type {go_type}"
    )


def _decode(value: Any, kind: _Type, *, struct: str, path: str, go_type: str) -> None:
    """Raise `_Mismatch` where Go would fail to decode `value` as `kind`."""
    if value is None or isinstance(kind, _Raw):
        return
    if isinstance(kind, _Scalar):
        if kind is _INT64:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _type_error(value, struct, path, go_type)
            if isinstance(value, float) or not _INT64_RANGE[0] <= value <= _INT64_RANGE[1]:
                raise _Mismatch(
                    f"json: cannot unmarshal number {value!r} into Go struct "
                    f"field {struct}.{path} of type {go_type}"
                )
        elif kind is _BOOL:
            if not isinstance(value, bool):
                raise _type_error(value, struct, path, go_type)
        elif not isinstance(value, str):
            raise _type_error(value, struct, path, go_type)
        return
    if isinstance(kind, _Time):
        if not isinstance(value, str):
            raise _type_error(value, struct, path, "string")
        problem = rfc3339_error(value)
        if problem:
            raise _Mismatch(problem)
        return
    if isinstance(kind, _StringMap):
        if not isinstance(value, dict):
            raise _type_error(value, struct, path, "map[string]string")
        for item in value.values():
            if item is not None and not isinstance(item, str):
                raise _type_error(item, struct, path, "string")
        return
    if isinstance(kind, _List):
        if not isinstance(value, list):
            raise _type_error(value, struct, path, f"[]{kind.item_go_type}")
        for item in value:
            _decode(item, kind.item, struct=struct, path=path, go_type=kind.item_go_type)
        return
    if not isinstance(value, dict):
        raise _type_error(value, struct, path, go_type)
    for key, item in value.items():
        field = kind.fields.get(key)
        if field is not None:
            _decode(item, field, struct=kind.name, path=f"{path}.{key}", go_type=_go_type(field))


def _go_type(kind: _Type) -> str:
    if isinstance(kind, _Scalar):
        return kind.go_type
    if isinstance(kind, _Struct):
        return kind.go_type
    if isinstance(kind, _List):
        return f"[]{kind.item_go_type}"
    if isinstance(kind, _StringMap):
        return "map[string]string"
    return "v1.Time" if isinstance(kind, _Time) else "v1.FieldsV1"


def decode_error(metadata: Any, *, kind: str) -> str | None:
    """Go's error decoding `metadata` of an object of `kind` into metav1.ObjectMeta, if any."""
    try:
        _decode(metadata, OBJECT_META, struct=kind, path="metadata", go_type="v1.ObjectMeta")
    except _Mismatch as mismatch:
        return mismatch.text
    return None


# --- metav1.Time as Go parses it ---------------------------------------------------------------

_RFC3339_LAYOUT = "2006-01-02T15:04:05Z07:00"
_LAYOUT_STEPS: tuple[tuple[str, int, int], ...] = (
    # (layout element, digits, upper bound); a 0-digit element is a literal
    ("2006", 4, 9999),
    ("-", 0, 0),
    ("01", 2, 12),
    ("-", 0, 0),
    ("02", 2, 31),
    ("T", 0, 0),
    ("15", 2, 23),
    (":", 0, 0),
    ("04", 2, 59),
    (":", 0, 0),
    ("05", 2, 59),
)
_RANGE_NAMES = {"01": "month", "02": "day", "15": "hour", "04": "minute", "05": "second"}
_FRACTION = re.compile(r"[.,][0-9]+")
_OFFSET = re.compile(r"([+-])([0-9]{2}):([0-9]{2})")


def rfc3339_error(text: str) -> str | None:
    """Why Go's `time.Parse(time.RFC3339, text)` refuses `text` (its wording), or None."""
    head = f"parsing time {go_quote(text)}"

    def cannot(rest: str, element: str) -> str:
        return f'{head} as "{_RFC3339_LAYOUT}": cannot parse {go_quote(rest)} as "{element}"'

    rest = text
    values: dict[str, int] = {}
    for element, digits, bound in _LAYOUT_STEPS:
        if not digits:
            if not rest.startswith(element):
                return cannot(rest, element)
            rest = rest[len(element) :]
            continue
        chunk = rest[:digits]
        if len(chunk) < digits or not chunk.isascii() or not chunk.isdigit():
            return cannot(rest, element)
        values[element] = int(chunk)
        rest = rest[digits:]
        if element in _RANGE_NAMES and values[element] > bound:
            return f"{head}: {_RANGE_NAMES[element]} out of range"
    fraction = _FRACTION.match(rest)
    if fraction:
        rest = rest[fraction.end() :]
    if rest.startswith("Z"):
        rest = rest[1:]
    else:
        offset = _OFFSET.match(rest)
        if offset is None:
            return cannot(rest, "Z07:00")
        rest = rest[offset.end() :]
    if rest:
        return f"{head}: extra text: {go_quote(rest)}"
    year, month, day = values["2006"], values["01"], values["02"]
    if month == 0:
        return f"{head}: month out of range"
    if day == 0 or day > _days_in(year, month):
        return f"{head}: day out of range"
    return None


def _days_in(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _parse_time(text: str) -> datetime | None:
    """A metav1.Time already accepted by `rfc3339_error`, as a datetime (None if not)."""
    if rfc3339_error(text) is not None:
        return None
    match = re.fullmatch(
        r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:\d{2})", text
    )
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micro = int((match.group(7) or "0")[:6].ljust(6, "0"))
    zone = match.group(8)
    tz = UTC
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return datetime(year, month, day, hour, minute, second, micro, tz)


def go_time(text: str) -> str:
    """A metav1.Time as Go's time.Time.String() prints it in a field error (second precision).

    metav1.Time marshals at second precision, so the fraction is dropped as kube drops it."""
    moment = _parse_time(text)
    if moment is None:
        return go_quote(text)
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


# --- 2. what an update silently keeps ------------------------------------------------------------


def prepare_update(meta: dict[str, Any], old: Mapping[str, Any]) -> None:
    """rest.BeforeUpdate's resets: uid when unset, creationTimestamp, deletion fields once set."""
    if not meta.get("uid") and old.get("uid"):
        meta["uid"] = old["uid"]
    if old.get("creationTimestamp"):
        meta["creationTimestamp"] = old["creationTimestamp"]
    if old.get("deletionTimestamp"):
        meta["deletionTimestamp"] = old["deletionTimestamp"]
    if old.get("deletionGracePeriodSeconds") is not None and (
        meta.get("deletionGracePeriodSeconds") is None
    ):
        meta["deletionGracePeriodSeconds"] = old["deletionGracePeriodSeconds"]


# --- 3. validation -------------------------------------------------------------------------------


def _invalid(field: str, shown: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", field)


def _text(value: Any) -> str:
    """A decoded string field: None (Go's zero value) reads as ""."""
    return value if isinstance(value, str) else ""


def dns_subdomain_name(name: str, prefix: bool) -> list[str]:
    """kube's NameIsDNSSubdomain: a custom resource's names (generateName with its dash masked)."""
    if prefix:
        name = _mask_trailing_dash(name)
    return labelnames.dns1123_subdomain_errors(name)


def dns_label_name(name: str, prefix: bool) -> list[str]:
    """kube's NameIsDNSLabel (ValidateNamespaceName)."""
    if prefix:
        name = _mask_trailing_dash(name)
    return labelnames.dns1123_label_errors(name)


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """kube's ValidatePathSegmentName: what every update checks of a name."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def _mask_trailing_dash(name: str) -> str:
    # kube drops the last two characters and appends "a" (a one-character "-" becomes "a").
    return name[:-2] + "a" if name.endswith("-") else name


def validate_create(
    meta: Mapping[str, Any], *, namespaced: bool, name_rule: NameRule = dns_subdomain_name
) -> list[Cause]:
    """ValidateObjectMetaAccessor of a new object whose name has been generated."""
    causes: list[Cause] = []
    generate_name = _text(meta.get("generateName"))
    if generate_name:
        causes += [
            _invalid("metadata.generateName", go_quote(generate_name), problem)
            for problem in name_rule(generate_name, True)
        ]
    causes += _name_causes(_text(meta.get("name")), name_rule)
    return causes + _common(meta, namespaced=namespaced)


def validate_update(
    meta: Mapping[str, Any],
    old: Mapping[str, Any],
    *,
    namespaced: bool,
    name_rule: NameRule = path_segment_name,
) -> list[Cause]:
    """validateCommonFields of an update: the object's rules and what may not change."""
    causes: list[Cause] = []
    generate_name = _text(meta.get("generateName"))
    if generate_name:
        causes += [
            _invalid("metadata.generateName", go_quote(generate_name), problem)
            for problem in name_rule(generate_name, True)
        ]
    causes += _name_causes(_text(meta.get("name")), name_rule)
    # Client-sent managedFields are the field manager's to replace or ignore
    # (plnt.registry.managedfields), as kube's field manager does before validation.
    causes += _common(meta, namespaced=namespaced, managed=False)
    if old.get("deletionTimestamp"):
        added = sorted(set(_strings(meta.get("finalizers"))) - set(_strings(old.get("finalizers"))))
        if added:
            listed = ", ".join(go_quote(name) for name in added)
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{listed}}}",
                    "metadata.finalizers",
                )
            )
    if not _text(meta.get("resourceVersion")):
        causes.append(_invalid("metadata.resourceVersion", '""', "must be specified for an update"))
    generation, old_generation = meta.get("generation"), old.get("generation")
    if (
        isinstance(generation, int)
        and isinstance(old_generation, int)
        and generation < old_generation
    ):
        causes.append(_invalid("metadata.generation", str(generation), "must not be decremented"))
    for field in ("name", "namespace", "uid"):
        if _text(meta.get(field)) != _text(old.get(field)):
            causes.append(
                _invalid(f"metadata.{field}", go_quote(_text(meta.get(field))), FIELD_IMMUTABLE)
            )
    for field in ("creationTimestamp", "deletionTimestamp"):
        new_time, old_time = meta.get(field), old.get(field)
        if _time_key(new_time) != _time_key(old_time):
            shown = go_time(new_time) if isinstance(new_time, str) else "null"
            causes.append(_invalid(f"metadata.{field}", shown, FIELD_IMMUTABLE))
    grace, old_grace = meta.get("deletionGracePeriodSeconds"), old.get("deletionGracePeriodSeconds")
    if grace != old_grace:
        shown = "null" if grace is None else str(grace)
        causes.append(_invalid("metadata.deletionGracePeriodSeconds", shown, FIELD_IMMUTABLE))
    return causes


def _time_key(value: Any) -> Any:
    """Times compare as kube compares metav1.Time: to the second, whatever the zone."""
    if not isinstance(value, str) or not value:
        return None
    moment = _parse_time(value)
    return value if moment is None else int(moment.timestamp())


def _name_causes(name: str, name_rule: NameRule) -> list[Cause]:
    if not name:
        return [
            Cause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        ]
    return [_invalid("metadata.name", go_quote(name), p) for p in name_rule(name, False)]


def _common(meta: Mapping[str, Any], *, namespaced: bool, managed: bool = True) -> list[Cause]:
    """validateObjectMetaAccessorWithOptsCommon: what creates and updates share."""
    causes: list[Cause] = []
    namespace = _text(meta.get("namespace"))
    if namespaced:
        if not namespace:
            causes.append(Cause("FieldValueRequired", "Required value", "metadata.namespace"))
        else:
            causes += [
                _invalid("metadata.namespace", go_quote(namespace), problem)
                for problem in dns_label_name(namespace, False)
            ]
    elif namespace:
        forbidden = "Forbidden: not allowed on this type"
        causes.append(Cause("FieldValueForbidden", forbidden, "metadata.namespace"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(_invalid("metadata.generation", str(generation), NON_NEGATIVE))
    causes += label_causes(_string_map(meta.get("labels")))
    causes += annotation_causes(_string_map(meta.get("annotations")))
    causes += owner_reference_causes(_dicts(meta.get("ownerReferences")))
    causes += finalizer_causes(_strings(meta.get("finalizers")))
    if managed:
        causes += managed_fields_causes(meta.get("managedFields"))
    return causes


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {key: item if isinstance(item, str) else "" for key, item in value.items()}


def _strings(value: Any) -> list[str]:
    return [_text(item) for item in value] if isinstance(value, list) else []


def _dicts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, dict) else {} for item in value]


def label_causes(labels: Mapping[str, str], field: str = "metadata.labels") -> list[Cause]:
    """ValidateLabels: every key a qualified name, every value a label value."""
    causes: list[Cause] = []
    for key, value in labels.items():
        for problem in labelnames.label_key_errors(key):
            causes.append(_invalid(field, go_quote(key), problem))
        for problem in labelnames.label_value_errors(value):
            causes.append(_invalid(field, go_quote(value), problem))
    return causes


def annotation_causes(
    annotations: Mapping[str, str], field: str = "metadata.annotations"
) -> list[Cause]:
    """ValidateAnnotations: keys are qualified names in any case; 256 KiB in all."""
    causes = [
        _invalid(field, go_quote(key), problem)
        for key in annotations
        for problem in labelnames.label_key_errors(key.lower())
    ]
    total = sum(_bytes(key) + _bytes(value) for key, value in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_B:
        causes.append(_too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT_B))
    return causes


def _too_long(field: str, limit: int) -> Cause:
    return Cause("FieldValueTooLong", f"Too long: may not be more than {limit} bytes", field)


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def owner_reference_causes(
    references: Sequence[Mapping[str, Any]], field: str = "metadata.ownerReferences"
) -> list[Cause]:
    """ValidateOwnerReferences: each reference complete, no Event owner, one controller."""
    causes: list[Cause] = []
    first_controller = ""
    for ref in references:
        api_version, kind = _text(ref.get("apiVersion")), _text(ref.get("kind"))
        group, version = _group_version(api_version)
        if not version:
            causes.append(
                _invalid(f"{field}.apiVersion", go_quote(api_version), "version must not be empty")
            )
        for name in ("kind", "name", "uid"):
            if not _text(ref.get(name)):
                causes.append(_invalid(f"{field}.{name}", '""', "must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            causes.append(
                _invalid(
                    field,
                    _go_owner_reference(ref),
                    f"{group}/{version}, Kind={kind} is disallowed from being an owner",
                )
            )
        if ref.get("controller") is True:
            current = f"{kind}/{_text(ref.get('name'))}"
            if first_controller:
                shown = (
                    "[]v1.OwnerReference{"
                    + ", ".join(_go_owner_reference(r) for r in references)
                    + "}"
                )
                causes.append(
                    _invalid(
                        field,
                        shown,
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return causes


def _group_version(api_version: str) -> tuple[str, str]:
    """schema.ParseGroupVersion, with what FromAPIVersionAndKind makes of a parse error."""
    if not api_version:
        return "", ""
    if api_version == "v1" or "/" not in api_version:
        return "", api_version
    parts = api_version.split("/")
    if len(parts) != 2:
        return "", ""
    return parts[0], parts[1]


def _go_owner_reference(ref: Mapping[str, Any]) -> str:
    """%#v of a metav1.OwnerReference (a pointer shows its value, not an address)."""

    def pointer(value: Any) -> str:
        return "(*bool)(nil)" if not isinstance(value, bool) else f"(*bool)({str(value).lower()})"

    return (
        f"v1.OwnerReference{{APIVersion:{go_quote(_text(ref.get('apiVersion')))}, "
        f"Kind:{go_quote(_text(ref.get('kind')))}, Name:{go_quote(_text(ref.get('name')))}, "
        f"UID:{go_quote(_text(ref.get('uid')))}, Controller:{pointer(ref.get('controller'))}, "
        f"BlockOwnerDeletion:{pointer(ref.get('blockOwnerDeletion'))}}}"
    )


def finalizer_causes(finalizers: Sequence[str], field: str = "metadata.finalizers") -> list[Cause]:
    """ValidateFinalizers: qualified names, and never both orphan and foregroundDeletion."""
    causes = [
        _invalid(field, go_quote(name), problem)
        for name in finalizers
        for problem in labelnames.label_key_errors(name)
    ]
    if ORPHAN_FINALIZER in finalizers and FOREGROUND_FINALIZER in finalizers:
        listed = ", ".join(go_quote(name) for name in finalizers)
        causes.append(
            _invalid(
                field,
                f"[]string{{{listed}}}",
                f"finalizer {ORPHAN_FINALIZER} and {FOREGROUND_FINALIZER} cannot be both set",
            )
        )
    return causes


def managed_fields_causes(entries: Any, field: str = "metadata.managedFields") -> list[Cause]:
    """ValidateManagedFields: operation, fieldsType, manager and subresource of each entry."""
    causes: list[Cause] = []
    for index, entry in enumerate(_dicts(entries)):
        at = f"{field}[{index}]"
        operation = _text(entry.get("operation"))
        if operation not in ("Apply", "Update"):
            causes.append(
                _invalid(f"{at}.operation", go_quote(operation), "must be `Apply` or `Update`")
            )
        fields_type = _text(entry.get("fieldsType"))
        if fields_type and fields_type != "FieldsV1":
            causes.append(_invalid(f"{at}.fieldsType", go_quote(fields_type), "must be `FieldsV1`"))
        causes += field_manager_causes(_text(entry.get("manager")), f"{at}.manager")
        if _bytes(_text(entry.get("subresource"))) > MAX_SUBRESOURCE_NAME_LENGTH:
            causes.append(_too_long(f"{at}.subresource", MAX_SUBRESOURCE_NAME_LENGTH))
    return causes


def field_manager_causes(manager: str, field: str = "fieldManager") -> list[Cause]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[Cause] = []
    if _bytes(manager) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(_too_long(field, FIELD_MANAGER_MAX_LENGTH))
    for position, char in _byte_positions(manager):
        if not char.isprintable() and char != " ":
            causes.append(
                _invalid(
                    field,
                    go_quote(manager),
                    f"invalid character U+{ord(char):04X} (at position {position})",
                )
            )
    return causes


def _byte_positions(text: str) -> Iterator[tuple[int, str]]:
    position = 0
    for char in text:
        yield position, char
        position += _bytes(char)


def finalizer_warnings(meta: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[str]:
    """The warnings kube gives a custom resource for each finalizer added without a domain."""
    added = sorted(
        set(_strings(meta.get("finalizers"))) - set(_strings((old or {}).get("finalizers")))
    )
    return [
        f"metadata.finalizers: {go_quote(name)}: prefer a domain-qualified finalizer name "
        "including a path (/) to avoid accidental conflicts with other finalizer writers"
        for name in added
        if "/" not in name and not labelnames.label_key_errors(name)
    ]
