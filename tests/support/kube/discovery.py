"""The stand-in's own discovery documents, legacy and aggregated (apidiscovery.k8s.io/v2).

Its groups are core ("" v1: events, configmaps, namespaces, services, pods, nodes,
secrets), apps/v1 (deployments), discovery.k8s.io/v1 (endpointslices), autoscaling/v2
(horizontalpodautoscalers), networking.k8s.io/v1 (ingresses), policy/v1
(poddisruptionbudgets), authentication.k8s.io/v1 (tokenreviews, selfsubjectreviews),
authorization.k8s.io/v1 (subjectaccessreviews, selfsubjectaccessreviews) and
events.k8s.io/v1 (events), built from `kinds.VIEWS` plus the review endpoints.
Subresources (`deployments/status`, `deployments/scale` answering an autoscaling/v1
Scale ...) are listed as kube lists them: their own entries in legacy discovery, nested
`subresources` in aggregated discovery. Verbs are sorted, as the generic server sorts
them. Aggregated documents carry a `responseKind` on every resource (client-go drops entries without
one). No I/O here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tests.support.kube import kinds

Obj = dict[str, Any]
V2_MEDIA = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@dataclass(frozen=True, slots=True)
class Entry:
    group: str
    version: str
    resource: str
    kind: str
    singular: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()


_SUB_VERBS = ("get", "patch", "update")
_CATEGORIES = {"deployments": ["all"], "pods": ["all"], "services": ["all"],
               "horizontalpodautoscalers": ["all"]}  # fmt: skip


def _sub_kind(entry: Entry, subresource: str) -> tuple[str, str, str]:
    """(group, version, kind) a subresource answers: a Scale for scale, else the kind."""
    if subresource == "scale":
        return "autoscaling", "v1", "Scale"
    return entry.group, entry.version, entry.kind


def _review(group: str, kind: str) -> Entry:
    return Entry(group, "v1", kind.lower() + "s", kind, kind.lower(), False, ("create",))


REVIEWS = (
    _review("authentication.k8s.io", "SelfSubjectReview"),
    _review("authentication.k8s.io", "TokenReview"),
    _review("authorization.k8s.io", "SelfSubjectAccessReview"),
    _review("authorization.k8s.io", "SubjectAccessReview"),
)


def entries() -> list[Entry]:
    out = [
        Entry(v.group, v.version, v.resource, v.kind, v.singular, v.namespaced, v.verbs,
              v.short_names, v.subresources)
        for v in kinds.VIEWS
    ]  # fmt: skip
    return out + list(REVIEWS)


def groups() -> dict[str, list[str]]:
    """Versions per group, core ("") first, then named groups sorted by name."""
    found: dict[str, list[str]] = {}
    for entry in entries():
        versions = found.setdefault(entry.group, [])
        if entry.version not in versions:
            versions.append(entry.version)
    return {name: found[name] for name in sorted(found)}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def api_group(name: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": listed,
        "preferredVersion": listed[0],
    }


def resource_list(group: str, version: str) -> Obj | None:
    found = [e for e in entries() if (e.group, e.version) == (group, version)]
    if not found:
        return None
    resources = [
        {
            "name": e.resource,
            "singularName": e.singular,
            "namespaced": e.namespaced,
            "kind": e.kind,
            "verbs": sorted(e.verbs),
            **({"shortNames": list(e.short_names)} if e.short_names else {}),
            **({"categories": _CATEGORIES[e.resource]} if e.resource in _CATEGORIES else {}),
        }
        for e in found
    ]
    for e in found:
        for sub in e.subresources:
            group, version, kind = _sub_kind(e, sub)
            extra = {"group": group, "version": version} if sub == "scale" else {}
            resources.append(
                {"name": f"{e.resource}/{sub}", "singularName": "", "namespaced": e.namespaced,
                 **extra, "kind": kind, "verbs": list(_SUB_VERBS)}
            )  # fmt: skip
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def v2_group(group: str) -> Obj:
    versions = []
    for version in groups()[group]:
        resources = [
            {
                "resource": e.resource,
                "responseKind": {"group": e.group, "version": e.version, "kind": e.kind},
                "scope": "Namespaced" if e.namespaced else "Cluster",
                "singularResource": e.singular,
                "verbs": sorted(e.verbs),
                **({"shortNames": list(e.short_names)} if e.short_names else {}),
                **({"categories": _CATEGORIES[e.resource]} if e.resource in _CATEGORIES else {}),
                **(
                    {"subresources": [_v2_sub(e, sub) for sub in e.subresources]}
                    if e.subresources
                    else {}
                ),
            }
            for e in entries()
            if (e.group, e.version) == (group, version)
        ]
        versions.append({"version": version, "resources": resources, "freshness": "Current"})
    metadata: Obj = {"name": group} if group else {}
    metadata["creationTimestamp"] = None
    return {"metadata": metadata, "versions": versions}


def _v2_sub(entry: Entry, subresource: str) -> Obj:
    group, version, kind = _sub_kind(entry, subresource)
    return {
        "subresource": subresource,
        "responseKind": {"group": group, "version": version, "kind": kind},
        "verbs": list(_SUB_VERBS),
    }


def v2_list(items: list[Obj]) -> Obj:
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def etag(body: bytes) -> str:
    return '"' + hashlib.sha512(body).hexdigest()[:64].upper() + '"'


def wants_v2(accept: str) -> bool:
    """True when the Accept list asks for aggregated discovery v2 (any parameter order)."""
    for entry in accept.split(","):
        media, *params = [p.strip() for p in entry.split(";")]
        values = {p.partition("=")[0]: p.partition("=")[2] for p in params}
        if (
            media == "application/json"
            and values.get("g") == "apidiscovery.k8s.io"
            and values.get("v") == "v2"
            and values.get("as") == "APIGroupDiscoveryList"
        ):
            return True
    return False


def dumps(obj: Obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
