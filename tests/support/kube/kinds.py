"""The table of kinds the stand-in serves, one `View` per (group, version, resource).

A view says how a resource looks on the wire (discovery names, verbs, scope), which
stored resource it reads (two views may share one: core/v1 and events.k8s.io/v1
Events), how to convert between its JSON and the stored JSON, which field-selector
labels it supports, kube's validation beyond the schema, its subresources (`status`,
`scale`) and its strategy (`prepare`: defaulting, status and generation rules; see
`workloads`). The workload kinds of the Kubernetes target (Deployments, Services, Pods,
Nodes, Secrets, EndpointSlices, HorizontalPodAutoscalers, Ingresses,
PodDisruptionBudgets) and the Gateway API's HTTPRoutes are entries here like the others.
No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.kube import events, statuses, workloads

Obj = dict[str, Any]
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _identity(obj: Obj) -> Obj:
    return dict(obj)


def _metadata_field(stored: Obj, label: str) -> str:
    meta = stored.get("metadata") or {}
    return str(meta.get(label.removeprefix("metadata."), ""))


def _no_checks(stored: Obj, old: Obj | None) -> list[statuses.Cause]:
    return []


def _no_prepare(stored: Obj, old: Obj | None) -> None:
    return None


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _namespace_checks(stored: Obj, old: Obj | None) -> list[statuses.Cause]:
    name = stored["metadata"]["name"]
    if _DNS1123_LABEL.match(name) and len(name) <= 63:
        return []
    return [
        statuses.field_invalid(
            "metadata.name",
            name,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character",
        )
    ]


@dataclass(frozen=True, slots=True)
class View:
    """One served resource: wire names, the stored resource behind it, conversions."""

    group: str
    version: str
    resource: str
    kind: str
    singular: str
    namespaced: bool
    storage: str
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    to_view: Callable[[Obj], Obj] = _identity
    from_view: Callable[[Obj], Obj] = _identity
    # field-selector label of this view -> label on the stored form
    field_labels: Mapping[str, str] = field(
        default_factory=lambda: {
            "metadata.name": "metadata.name",
            "metadata.namespace": "metadata.namespace",
        }
    )
    stored_field: Callable[[Obj, str], str] = _metadata_field
    checks: Callable[[Obj, Obj | None], list[statuses.Cause]] = _no_checks
    prepare: Callable[[Obj, Obj | None], None] = _no_prepare
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    def wire(self, stored: Obj) -> Obj:
        obj = self.to_view(stored)
        obj["kind"], obj["apiVersion"] = self.kind, self.api_version
        return obj


CORE_EVENTS = View(
    group="", version="v1", resource="events", kind="Event", singular="event",
    namespaced=True, storage="events", short_names=("ev",),
    to_view=events.to_core, from_view=events.from_core,
    field_labels={label: label for label in events.CORE_FIELD_LABELS},
    stored_field=events.field_value,
    checks=lambda stored, old: events.validate(stored, old, strict=False),
)  # fmt: skip
EVENTS_V1 = View(
    group="events.k8s.io", version="v1", resource="events", kind="Event", singular="event",
    namespaced=True, storage="events", short_names=("ev",),
    to_view=events.to_events_v1, from_view=events.from_events_v1,
    field_labels=events.EVENTS_V1_FIELD_LABELS,
    stored_field=events.field_value,
    checks=lambda stored, old: events.validate(stored, old, strict=True),
)  # fmt: skip
CONFIGMAPS = View(
    group="", version="v1", resource="configmaps", kind="ConfigMap", singular="configmap",
    namespaced=True, storage="configmaps", short_names=("cm",),
)  # fmt: skip
NAMESPACES = View(
    group="", version="v1", resource="namespaces", kind="Namespace", singular="namespace",
    namespaced=False, storage="namespaces", short_names=("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    checks=_namespace_checks,
)  # fmt: skip


def _workload(group: str, version: str, kind: str, resource: str, **options: Any) -> View:
    return View(
        group=group, version=version, resource=resource, kind=kind, singular=kind.lower(),
        namespaced=options.pop("namespaced", True), storage=resource,
        checks=workloads.checks(kind), prepare=workloads.strategy(kind), **options,
    )  # fmt: skip


DEPLOYMENTS = _workload("apps", "v1", "Deployment", "deployments", short_names=("deploy",),
                        subresources=("status", "scale"))  # fmt: skip
SERVICES = _workload("", "v1", "Service", "services", short_names=("svc",),
                     subresources=("status",))  # fmt: skip
PODS = _workload("", "v1", "Pod", "pods", short_names=("po",), subresources=("status",),
                 field_labels={"metadata.name": "metadata.name",
                               "metadata.namespace": "metadata.namespace",
                               "spec.nodeName": "spec.nodeName", "status.phase": "status.phase"},
                 stored_field=workloads.field_value)  # fmt: skip
NODES = _workload("", "v1", "Node", "nodes", namespaced=False, short_names=("no",),
                  subresources=("status",))  # fmt: skip
SECRETS = _workload("", "v1", "Secret", "secrets", from_view=workloads.secret_from_view,
                    field_labels={"metadata.name": "metadata.name",
                                  "metadata.namespace": "metadata.namespace", "type": "type"},
                    stored_field=workloads.field_value)  # fmt: skip
ENDPOINT_SLICES = _workload("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices")
HPAS = _workload("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                 short_names=("hpa",), subresources=("status",))  # fmt: skip
INGRESSES = _workload("networking.k8s.io", "v1", "Ingress", "ingresses", short_names=("ing",),
                      subresources=("status",))  # fmt: skip
PDBS = _workload("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets",
                 short_names=("pdb",), subresources=("status",))  # fmt: skip
HTTPROUTES = _workload("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes",
                       subresources=("status",))  # fmt: skip
"""Gateway API routes, validated against the Gateway API's own schemas (`gateways`)."""

VIEWS: tuple[View, ...] = (
    CORE_EVENTS, CONFIGMAPS, NAMESPACES, EVENTS_V1, DEPLOYMENTS, SERVICES, PODS, NODES,
    SECRETS, ENDPOINT_SLICES, HPAS, INGRESSES, PDBS, HTTPROUTES,
)  # fmt: skip


def find(group: str, version: str, resource: str) -> View | None:
    for view in VIEWS:
        if (view.group, view.version, view.resource) == (group, version, resource):
            return view
    return None


def group_versions() -> dict[str, list[str]]:
    """Served versions per group ("" is core), in table order."""
    out: dict[str, list[str]] = {}
    for view in VIEWS:
        versions = out.setdefault(view.group, [])
        if view.version not in versions:
            versions.append(view.version)
    return out
