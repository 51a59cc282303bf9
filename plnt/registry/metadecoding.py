"""ObjectMeta decoded as kube-apiserver's Go decoder decodes it, and metav1.Time as Go reads it.

Whatever the kind, kube decodes `metadata` into Go's `metav1.ObjectMeta` before anything
else; a value of the wrong JSON type stops the request there, with the text of Go's
encoding/json (`json: cannot unmarshal number into Go struct field
ObjectMeta.metadata.labels of type string`). `decode_error` gives that text: a POST or
PUT body gets it as a 400 (`WorkflowRun in version "v1" cannot be handled as a
WorkflowRun: ...`), the result of a patch as a 422 naming `patch`, as kube's patcher
reports a patched object it cannot decode (`admitting` chooses). Nulls leave a field
unset, unknown fields are `fieldvalidation`'s business, and the first error in document
order is the one reported (as Go's decoder does).

metav1.Time is read as Go's `time.Parse(time.RFC3339, ...)` reads it (`rfc3339_error`
words its refusals) and printed as Go prints a time in a field error (`go_time`).
Validation of what decodes is `metavalidation`'s. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from plnt.registry.labelnames import go_json_type, go_quote


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


def parse_time(text: str) -> datetime | None:
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
    moment = parse_time(text)
    if moment is None:
        return go_quote(text)
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
