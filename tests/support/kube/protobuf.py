"""Just enough of kube's protobuf wire format to read what client-go sends as protobuf.

client-go's typed clients send built-in kinds as `application/vnd.kubernetes.protobuf`:
the magic `k8s\\x00`, then a `runtime.Unknown` (typeMeta=1 {apiVersion=1, kind=2},
raw=2, contentEncoding=3, contentType=4) whose raw bytes are the object's message.
kubectl sends SelfSubjectAccessReview this way (`auth can-i`; only the string fields of
the review specs are decoded, numbers from k8s.io/api `authorization/v1/generated.proto`);
Helm's `secret` and `configmap` release drivers send core/v1 Secret and ConfigMap.

Those two kinds are decoded into the JSON the JSON path would receive, field by field
from the numbers of k8s.io/api `core/v1/generated.proto` (Secret, ConfigMap) and
k8s.io/apimachinery `meta/v1/generated.proto` (ObjectMeta, Time, OwnerReference,
ManagedFieldsEntry); `decode_object` picks the kind from the body's typeMeta, defaulted
from the URL as kube's serializer does, and like kube it skips unknown field numbers and
ignores contentEncoding and contentType. Bytes (Secret data, ConfigMap binaryData) become
base64; a Time keeps whole seconds only, as `metav1.Time.Unmarshal` does; a zero Time (an
empty message) and empty strings and zero generations are left out, as JSON's
`omitempty` leaves them out; pointer fields (immutable, deletionGracePeriodSeconds, an
owner reference's bools) are kept whenever present. The stand-in answers in JSON, which
every client's Accept list allows, and client-go decodes a response by its Content-Type.

The reader is written by hand: the `protobuf` package has no descriptors for kube's
types, and its wire-level decoder is private API (`google.protobuf.internal`), while the
wire format needs only varints and length-delimited fields. Malformed input raises
`ValueError`. No I/O here.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"k8s\x00"
MEDIA = "application/vnd.kubernetes.protobuf"
Obj = dict[str, Any]
Value = bytes | int
_RESOURCE_FIELDS = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_FIELDS = {1: "path", 2: "verb"}


# --- the wire format ------------------------------------------------------------------


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("truncated or overlong protobuf varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def fields(data: bytes) -> list[tuple[int, Value]]:
    """(field number, varint or length-delimited bytes), in wire order; fixed-size skipped."""
    out: list[tuple[int, Value]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            length, i = _varint(data, i)
            if i + length > len(data):
                raise ValueError(f"protobuf field {number} runs past the end of its message")
            out.append((number, data[i : i + length]))
            i += length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _unwrap(body: bytes) -> tuple[str, str, bytes]:
    """apiVersion, kind and raw object bytes of a `k8s\\x00` + runtime.Unknown body."""
    if not body.startswith(MAGIC):
        raise ValueError(
            f"provided data does not appear to be a protobuf message, expected prefix {MAGIC!r}"
        )
    if len(body) == len(MAGIC):
        raise ValueError("empty body")
    api_version = kind = ""
    raw = b""
    for number, value in fields(body[len(MAGIC) :]):
        if number == 1:
            type_meta = _message(_TYPE_META)(value)
            api_version = type_meta.get("apiVersion", "")
            kind = type_meta.get("kind", "")
        elif number == 2:
            raw = _bytes(value)
    return api_version, kind, raw


# --- scalar readers -------------------------------------------------------------------


def _bytes(value: Value) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("a length-delimited protobuf field was sent as a varint")
    return value


def _int(value: Value) -> int:
    if not isinstance(value, int):
        raise ValueError("a varint protobuf field was sent length-delimited")
    return value


def _string(value: Value) -> str:
    return _bytes(value).decode()


def _base64(value: Value) -> str:
    return base64.b64encode(_bytes(value)).decode()


def _int64(value: Value) -> int:
    number = _int(value)
    return number - (1 << 64) if number >= 1 << 63 else number


def _bool(value: Value) -> bool:
    return _int(value) != 0


def _time(value: Value) -> str | None:
    """metav1.Time: an empty message is the zero time (JSON null); nanos are dropped."""
    data = _bytes(value)
    if not data:
        return None
    seconds = 0
    for number, item in fields(data):
        if number == 1:
            seconds = _int64(item)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _fields_v1(value: Value) -> Any:
    """FieldsV1 {Raw=1}: the raw JSON of the managed field set."""
    raw = b"{}"
    for number, item in fields(_bytes(value)):
        if number == 1:
            raw = _bytes(item)
    return json.loads(raw)


# --- messages -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: its JSON name, how to read it and how JSON shows it."""

    name: str
    read: Callable[[Value], Any]
    shape: str = "scalar"  # "scalar", "list" (repeated) or "map" (entries key=1, value=2)
    keep_empty: bool = False  # a pointer or non-omitempty field: present even when zero


Message = Mapping[int, Field]


def _message(spec: Message) -> Callable[[Value], Obj]:
    def read(value: Value) -> Obj:
        out: Obj = {}
        for number, item in fields(_bytes(value)):
            field = spec.get(number)
            if field is None:
                continue  # kube's generated unmarshallers skip unknown fields too
            if field.shape == "map":
                key, entry = "", field.read(b"")
                for entry_number, part in fields(_bytes(item)):
                    if entry_number == 1:
                        key = _string(part)
                    elif entry_number == 2:
                        entry = field.read(part)
                out.setdefault(field.name, {})[key] = entry
            elif field.shape == "list":
                out.setdefault(field.name, []).append(field.read(item))
            else:
                out[field.name] = field.read(item)
        kept = {f.name for f in spec.values() if f.keep_empty}
        return {
            name: value
            for name, value in out.items()
            if value is not None and (name in kept or value not in ("", 0))
        }

    return read


_TYPE_META: Message = {1: Field("apiVersion", _string), 2: Field("kind", _string)}
_OWNER_REFERENCE: Message = {
    5: Field("apiVersion", _string, keep_empty=True),
    1: Field("kind", _string, keep_empty=True),
    3: Field("name", _string, keep_empty=True),
    4: Field("uid", _string, keep_empty=True),
    6: Field("controller", _bool, keep_empty=True),
    7: Field("blockOwnerDeletion", _bool, keep_empty=True),
}
_MANAGED_FIELDS_ENTRY: Message = {
    1: Field("manager", _string),
    2: Field("operation", _string),
    3: Field("apiVersion", _string),
    4: Field("time", _time),
    6: Field("fieldsType", _string),
    7: Field("fieldsV1", _fields_v1),
    8: Field("subresource", _string),
}
_OBJECT_META: Message = {
    1: Field("name", _string),
    2: Field("generateName", _string),
    3: Field("namespace", _string),
    4: Field("selfLink", _string),
    5: Field("uid", _string),
    6: Field("resourceVersion", _string),
    7: Field("generation", _int64),
    8: Field("creationTimestamp", _time),
    9: Field("deletionTimestamp", _time),
    10: Field("deletionGracePeriodSeconds", _int64, keep_empty=True),
    11: Field("labels", _string, shape="map"),
    12: Field("annotations", _string, shape="map"),
    13: Field("ownerReferences", _message(_OWNER_REFERENCE), shape="list"),
    14: Field("finalizers", _string, shape="list"),
    17: Field("managedFields", _message(_MANAGED_FIELDS_ENTRY), shape="list"),
}
_SECRET: Message = {
    1: Field("metadata", _message(_OBJECT_META), keep_empty=True),
    2: Field("data", _base64, shape="map"),
    3: Field("type", _string),
    4: Field("stringData", _string, shape="map"),
    5: Field("immutable", _bool, keep_empty=True),
}
_CONFIG_MAP: Message = {
    1: Field("metadata", _message(_OBJECT_META), keep_empty=True),
    2: Field("data", _string, shape="map"),
    3: Field("binaryData", _base64, shape="map"),
    4: Field("immutable", _bool, keep_empty=True),
}
_KINDS: Mapping[tuple[str, str], Message] = {
    ("v1", "Secret"): _SECRET,
    ("v1", "ConfigMap"): _CONFIG_MAP,
}


def decodes(api_version: str, kind: str) -> bool:
    """Whether `decode_object` reads this kind."""
    return (api_version, kind) in _KINDS


def decode_object(body: bytes, *, api_version: str, kind: str) -> Obj:
    """The JSON form of a protobuf body; `api_version`/`kind` (the URL's) fill an empty typeMeta.

    Raises ValueError for a body that is not kube protobuf or holds a kind not decoded here.
    """
    sent_version, sent_kind, raw = _unwrap(body)
    api_version, kind = sent_version or api_version, sent_kind or kind
    spec = _KINDS.get((api_version, kind))
    if spec is None:
        raise ValueError(f"no protobuf decoder for kind {kind!r} in version {api_version!r}")
    return {"apiVersion": api_version, "kind": kind, **_message(spec)(raw)}


def decode_self_subject_access_review(body: bytes) -> Obj:
    _, _, raw = _unwrap(body)
    spec: Obj = {}
    for number, value in fields(raw):
        if number == 2 and isinstance(value, bytes):
            for inner_number, inner in fields(value):
                if inner_number == 1 and isinstance(inner, bytes):
                    spec["resourceAttributes"] = _strings(inner, _RESOURCE_FIELDS)
                elif inner_number == 2 and isinstance(inner, bytes):
                    spec["nonResourceAttributes"] = _strings(inner, _NON_RESOURCE_FIELDS)
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": spec,
    }


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, v in fields(data) if n in names and isinstance(v, bytes)}
