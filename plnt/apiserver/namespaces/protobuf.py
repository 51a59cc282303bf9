"""The one Namespace body kubectl sends as protobuf (`kubectl create namespace`), decoded.

Only the fields a client may set are read (name, generateName, labels, annotations,
finalizers, spec.finalizers); the wire format is `plnt.apiserver.protowire`'s. Errors: a
truncated body is `errors.BadRequest` (from `protowire`).
"""

from __future__ import annotations

from plnt.apiserver import protowire
from plnt.registry.definitions import Object


def decode_namespace(data: bytes) -> Object:
    """A Namespace as `kubectl create namespace` sends it (protobuf): its name, labels,
    annotations and finalizers; the server sets or ignores everything else."""
    namespace = protowire.fields(protowire.unwrap(data))
    meta_bytes = namespace.get(1, b"")
    meta_fields = protowire.fields(meta_bytes)
    meta: Object = {}
    for number, key in ((1, "name"), (2, "generateName")):
        if number in meta_fields:
            meta[key] = protowire.text(meta_fields[number])
    for number, key in ((11, "labels"), (12, "annotations")):
        values = protowire.string_map(meta_bytes, number)
        if values:
            meta[key] = values
    finalizers = [protowire.text(v) for n, v in protowire.entries(meta_bytes) if n == 14]
    if finalizers:
        meta["finalizers"] = finalizers
    obj: Object = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
    spec = [protowire.text(v) for n, v in protowire.entries(namespace.get(2, b"")) if n == 1]
    if spec:
        obj["spec"] = {"finalizers": spec}
    return obj
