"""Reading the few kube protobuf bodies typed clients send: the wire format, not the schema.

kubectl sends built-in kinds (self reviews, `kubectl create namespace`) as
`application/vnd.kubernetes.protobuf` and does not fall back to JSON on a 415. No Python
package ships the Kubernetes API's generated messages, and these bodies need only
strings, maps of strings and nested messages, so the reader handles length-delimited
fields and skips the rest.
"""

from __future__ import annotations

from plnt.api import errors

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


def entries(data: bytes) -> list[tuple[int, bytes]]:
    """Every length-delimited field of one message, in order (repeated fields repeat)."""
    out: list[tuple[int, bytes]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise errors.BadRequest("the protobuf body of the request is truncated")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size = varint()
            if pos + size > len(data):
                raise errors.BadRequest("the protobuf body of the request is truncated")
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise errors.BadRequest(f"unsupported protobuf wire type {wire}")
    return out


def fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of one message (the last of each number wins)."""
    return dict(entries(data))


def strings(data: bytes, names: tuple[str, ...]) -> dict[str, str]:
    """String fields numbered 1, 2, … after `names`, those present."""
    found = fields(data)
    return {
        name: found[number].decode("utf-8", "replace")
        for number, name in enumerate(names, start=1)
        if number in found
    }


def text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def string_map(data: bytes, number: int) -> dict[str, str]:
    """A `map<string, string>` field: repeated entries of key (1) and value (2)."""
    out: dict[str, str] = {}
    for field_number, entry in entries(data):
        if field_number == number:
            pair = fields(entry)
            out[text(pair.get(1, b""))] = text(pair.get(2, b""))
    return out


def unwrap(data: bytes) -> bytes:
    """The encoded object inside kube's envelope: `k8s\\0`, then runtime.Unknown's raw."""
    if not data.startswith(MAGIC):
        raise errors.BadRequest("the protobuf body of the request lacks the k8s envelope")
    return fields(data[len(MAGIC) :]).get(2, b"")
