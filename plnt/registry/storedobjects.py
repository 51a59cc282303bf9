"""Stored objects: bytes in etcd to served objects and back, and resourceVersions parsed.

An object's resourceVersion is its etcd mod revision, so it is stripped before
storing and set when decoding. Storage errors become API errors in `storageerrors`.
"""

from __future__ import annotations

from plnt.api import codec, errors
from plnt.registry.objects import Object
from plnt.storage.interface import KeyValue


def encode(obj: Object) -> bytes:
    """Stored bytes: the object without its resourceVersion (that is the etcd revision)."""
    meta = obj.get("metadata", {})
    if "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return codec.dumps_sorted(obj)


def decode(kv: KeyValue) -> Object:
    """An object as served: stored bytes plus `resourceVersion` = mod revision."""
    obj: Object = codec.loads(kv.value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
    return obj


def parse_resource_version(value: str, *, field_name: str = "resourceVersion") -> int:
    """A resourceVersion from a client: a decimal etcd revision, else 400 naming the field."""
    try:
        revision = int(value)
    except ValueError:
        revision = -1
    if revision < 0:
        raise errors.BadRequest(
            f'Invalid value: "{value}": {field_name} must be an unsigned integer'
        )
    return revision
