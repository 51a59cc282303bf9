"""Discovery documents: legacy (/api, /apis, /apis/<g>, /apis/<g>/<v>) and aggregated v2.

Both formats are served (KUBE-API.md §1): kubectl takes v2 when both /api and
/apis answer it, the aggregator may fall back to the per-group-version document.
Every resource and subresource carries a responseKind, or client-go drops it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from plnt.registry.definitions import ResourceDefinition


def storage_version_hash(definition: ResourceDefinition) -> str:
    """An opaque, stable hash of the storage version (8 bytes of sha256, base64)."""
    text = f"{definition.group}/{definition.version}/{definition.kind}".encode()
    return base64.b64encode(hashlib.sha256(text).digest()[:8]).decode()


def api_resources(definitions: tuple[ResourceDefinition, ...]) -> list[dict[str, Any]]:
    """APIResource entries, subresources as `<plural>/<sub>` with an empty singularName."""
    out: list[dict[str, Any]] = []
    for d in definitions:
        entry: dict[str, Any] = {
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": sorted(d.verbs),
            "storageVersionHash": storage_version_hash(d),
        }
        if d.short_names:
            entry["shortNames"] = list(d.short_names)
        if d.categories:
            entry["categories"] = list(d.categories)
        out.append(entry)
        for sub in d.subresources:
            sub_entry: dict[str, Any] = {
                "name": f"{d.plural}/{sub.name}",
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": sub.kind,
                "verbs": sorted(sub.verbs),
            }
            if sub.group is not None:
                sub_entry["group"] = sub.group
            if sub.version is not None:
                sub_entry["version"] = sub.version
            out.append(sub_entry)
    return out


def resource_list(
    group_version: str, definitions: tuple[ResourceDefinition, ...]
) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": api_resources(definitions),
    }


def api_group(group: str, version: str) -> dict[str, Any]:
    gv = {"groupVersion": f"{group}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [gv],
        "preferredVersion": gv,
    }


def api_group_list(group: str, version: str) -> dict[str, Any]:
    entry = api_group(group, version)
    del entry["kind"], entry["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [entry]}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _v2_resource(d: ResourceDefinition) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": d.plural,
        "singularResource": d.singular,
        "scope": "Namespaced" if d.namespaced else "Cluster",
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "verbs": sorted(d.verbs),
    }
    if d.short_names:
        entry["shortNames"] = list(d.short_names)
    if d.categories:
        entry["categories"] = list(d.categories)
    subs = []
    for sub in d.subresources:
        subs.append(
            {
                "subresource": sub.name,
                "responseKind": {
                    "group": d.group if sub.group is None else sub.group,
                    "version": d.version if sub.version is None else sub.version,
                    "kind": sub.kind,
                },
                "verbs": sorted(sub.verbs),
            }
        )
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(
    group: str, version: str, definitions: tuple[ResourceDefinition, ...]
) -> dict[str, Any]:
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList with one group (core group name is "")."""
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": group} if group else {},
                "versions": [
                    {
                        "version": version,
                        "freshness": "Current",
                        "resources": [_v2_resource(d) for d in definitions],
                    }
                ],
            }
        ],
    }


def etag(document: dict[str, Any]) -> str:
    """A quoted strong ETag of a JSON document."""
    digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    return f'"{digest[:32]}"'
