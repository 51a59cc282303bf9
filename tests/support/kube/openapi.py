"""The stand-in's own OpenAPI documents: a v3 root, one v3 document per group/version, v2.

Enough for kubectl to resolve the stand-in's kinds: every path of every own resource
with `x-kubernetes-group-version-kind` and `x-kubernetes-action` on its operations,
and a PATCH that lists `fieldValidation` (so kubectl leaves validation to the server,
which validates against the real schemas anyway) and accepts apply patches; the `status`
and `scale` subresources have their paths too. Component schemas are not
published (an approximation: `kubectl explain` on the stand-in's own kinds is not
supported). No I/O here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.support.kube import discovery

Obj = dict[str, Any]
_PATCH_TYPES = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
]


def _gv_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _operation(entry: discovery.Entry, action: str) -> Obj:
    operation: Obj = {
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": entry.group,
            "version": entry.version,
            "kind": entry.kind,
        },
        "responses": {"200": {"description": "OK"}},
    }
    if action == "patch":
        operation["parameters"] = [
            {"name": name, "in": "query", "schema": {"type": "string"}}
            for name in ("dryRun", "fieldManager", "fieldValidation", "force")
        ]
        operation["requestBody"] = {
            "content": {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES}
        }
    return operation


def group_version_document(group: str, version: str) -> Obj | None:
    found = [e for e in discovery.entries() if (e.group, e.version) == (group, version)]
    if not found:
        return None
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: Obj = {}
    for entry in found:
        base = (
            f"{prefix}/namespaces/{{namespace}}/{entry.resource}"
            if entry.namespaced
            else f"{prefix}/{entry.resource}"
        )
        collection: Obj = {}
        if "create" in entry.verbs:
            collection["post"] = _operation(entry, "post")
        if "list" in entry.verbs:
            collection["get"] = _operation(entry, "list")
        paths[base] = collection
        if "get" in entry.verbs:
            paths[f"{base}/{{name}}"] = {
                "get": _operation(entry, "get"),
                "put": _operation(entry, "put"),
                "patch": _operation(entry, "patch"),
                "delete": _operation(entry, "delete"),
            }
            for sub in entry.subresources:
                paths[f"{base}/{{name}}/{sub}"] = {
                    "get": _operation(entry, "get"),
                    "put": _operation(entry, "put"),
                    "patch": _operation(entry, "patch"),
                }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def hash_of(document: Obj) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:128].upper()


def v3_root_paths() -> Obj:
    paths: Obj = {}
    for group, versions in discovery.groups().items():
        for version in versions:
            document = group_version_document(group, version)
            assert document is not None
            key = _gv_key(group, version)
            paths[key] = {"serverRelativeURL": f"/openapi/{'v3'}/{key}?hash={hash_of(document)}"}
    return paths


def v2_document() -> Obj:
    paths: Obj = {}
    for group, versions in discovery.groups().items():
        for version in versions:
            document = group_version_document(group, version)
            assert document is not None
            paths.update(document["paths"])
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0"},
        "paths": paths,
        "definitions": {},
    }
