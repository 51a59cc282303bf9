"""The structure of a kind, read from the same real schemas the stand-in validates against.

Server-side apply and strategic merge patch both need to know, at every field, whether a
list is atomic, a set, or a map keyed by some fields (`x-kubernetes-list-type`,
`x-kubernetes-list-map-keys`, `x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`)
and whether an object is a struct or a map of arbitrary keys. kube compiles this into
its types; here it is read from the `kubernetes-validate` schema of the kind, so the two
cannot drift apart. A `Node` is one schema position; walking an object walks its nodes.
No I/O beyond reading the packaged schema files (cached).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kubernetes_validate import utils as kv_utils

from tests.support.kube import gateways, schemas

Obj = dict[str, Any]


def _prefix() -> tuple[str, str]:
    versions = [
        v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= schemas.KUBERNETES_VERSION
    ]
    version = versions[-1]
    return f"kubernetes-json-schema/v{version}-local-strict", version


@functools.cache
def _definitions() -> Obj:
    prefix, version = _prefix()
    return dict(kv_utils.schema_contents(f"{prefix}/_definitions.json", version)["$defs"])


@functools.cache
def _kind_schema(kind: str, api_version: str) -> Obj:
    prefix, version = _prefix()
    group_version = api_version
    if "/" in api_version:
        group, _, ver = api_version.partition("/")
        group_version = f"{group.split('.', 1)[0]}-{ver}"
    return dict(kv_utils.schema_contents(f"{prefix}/{kind.lower()}-{group_version}.json", version))


def _resolve(schema: Obj) -> Obj:
    seen = 0
    while "$ref" in schema and seen < 32:
        name = str(schema["$ref"]).rpartition("/")[2]
        merged = dict(_definitions()[name])
        for key, value in schema.items():
            if key != "$ref":
                merged.setdefault(key, value)
        schema, seen = merged, seen + 1
    return schema


@dataclass(frozen=True)
class Node:
    """One position in a kind's schema."""

    schema: Obj

    @property
    def is_list(self) -> bool:
        kinds = self.schema.get("type")
        return kinds == "array" or (isinstance(kinds, list) and "array" in kinds)

    @property
    def is_struct(self) -> bool:
        return "properties" in self.schema

    @property
    def is_map(self) -> bool:
        """An object of arbitrary keys (labels, data, requests)."""
        extra = self.schema.get("additionalProperties")
        return not self.is_struct and isinstance(extra, dict)

    @property
    def list_type(self) -> str:
        """atomic, set or map (kube's default for a list without a marker is atomic)."""
        return str(self.schema.get("x-kubernetes-list-type") or "atomic")

    @property
    def map_keys(self) -> tuple[str, ...]:
        return tuple(self.schema.get("x-kubernetes-list-map-keys") or ())

    @property
    def merge_key(self) -> str:
        return str(self.schema.get("x-kubernetes-patch-merge-key") or "")

    @property
    def patch_strategies(self) -> tuple[str, ...]:
        raw = str(self.schema.get("x-kubernetes-patch-strategy") or "")
        return tuple(s for s in raw.split(",") if s)

    @property
    def is_atomic_struct(self) -> bool:
        return self.schema.get("x-kubernetes-map-type") == "atomic"

    def child(self, key: str) -> Node:
        if self.is_struct:
            found = self.schema["properties"].get(key)
            return Node(_resolve(found)) if isinstance(found, dict) else UNKNOWN
        extra = self.schema.get("additionalProperties")
        return Node(_resolve(extra)) if isinstance(extra, dict) else UNKNOWN

    def item(self) -> Node:
        items = self.schema.get("items")
        return Node(_resolve(items)) if isinstance(items, dict) else UNKNOWN


UNKNOWN = Node({})


def root(kind: str, api_version: str) -> Node:
    """The schema of a whole object of `kind` in `api_version`.

    A Gateway API kind (no kubernetes-validate schema) is its ObjectMeta with `spec` and
    `status` merged as atomic values: server-side apply then replaces a manager's spec
    whole, which is what kube does for a CRD's lists without list-type markers and is an
    approximation for its structs (one manager, plnt's worker, writes the spec).
    """
    if gateways.owns(api_version):
        meta = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
        return Node(
            {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": _resolve(meta),
                    "spec": {"x-kubernetes-map-type": "atomic"},
                    "status": {"x-kubernetes-map-type": "atomic"},
                },
            }
        )
    return Node(_resolve(_kind_schema(kind, api_version)))
