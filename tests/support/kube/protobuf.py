"""Just enough of kube's protobuf wire format to read what kubectl sends as protobuf.

kubectl's typed clients send built-in kinds (SelfSubjectAccessReview for `auth can-i`)
as `application/vnd.kubernetes.protobuf`: the magic `k8s\\x00`, then a
`runtime.Unknown` (typeMeta=1 {apiVersion=1, kind=2}, raw=2) whose raw bytes are the
object's message. Only the string fields of the review specs are decoded (field
numbers from k8s.io/api `authorization/v1/generated.proto`); the stand-in answers in
JSON, which kubectl's Accept list allows. No I/O here.
"""

from __future__ import annotations

from typing import Any

MAGIC = b"k8s\x00"
MEDIA = "application/vnd.kubernetes.protobuf"
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


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def fields(data: bytes) -> list[tuple[int, bytes | int]]:
    out: list[tuple[int, bytes | int]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            length, i = _varint(data, i)
            out.append((number, data[i : i + length]))
            i += length
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, v in fields(data) if n in names and isinstance(v, bytes)}


def decode_self_subject_access_review(body: bytes) -> dict[str, Any]:
    if not body.startswith(MAGIC):
        raise ValueError("not a kubernetes protobuf body")
    unknown = dict(fields(body[len(MAGIC) :]))
    raw = unknown.get(2, b"")
    assert isinstance(raw, bytes)
    spec: dict[str, Any] = {}
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
