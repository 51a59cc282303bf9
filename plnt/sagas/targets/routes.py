"""A run's Gateway API HTTPRoute: which route a run gets, and the object itself. No I/O.

A route is opt-in. The worker manages routes only with `--routes` (the chart's
`worker.kubernetesTarget.routes`), whose JSON is the cluster's default: the same shape
as a run's `spec.route` (`plnt.api.workflowruns.RouteSpec`) plus `everyRun`. A run gets
a route when its `spec.route` is set and enabled, or when it sets none and the cluster
routes every run; fields the run leaves out take the cluster's. The route is named as
the run, lives in the run's namespace, and sends `path` (a prefix, default `/`) on
`hostnames` through `gateway` to the revisions' Services (`<run>-r<revision>`, the chart's
`service.port`) by the weights the saga sets (`plnt.sagas.routing`). Every default the
Gateway API's CRD would fill in is written out, so the stored object is the one sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError

from plnt.api.workflowruns import GatewayReference, RouteSpec
from plnt.sagas.targets import runners
from plnt.sagas.targets.interface import RunRef, TargetError
from plnt.sagas.values import RouteBackend

GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
PLURAL = "httproutes"
KIND = "HTTPRoute"
DEFAULT_PATH = "/"


class RouteUnavailable(TargetError):
    """A run asks for a route this worker cannot make (no `--routes`, no Gateway)."""


class ClusterRoutes(RouteSpec):
    """The worker's `--routes`: the defaults of every run's route, and whether every
    run on the Kubernetes target gets one (`everyRun`)."""

    every_run: bool = Field(
        default=False, description="Route runs that set no spec.route too (spec.route wins)."
    )

    @classmethod
    def parse(cls, text: str) -> ClusterRoutes:
        """From the flag's JSON (`{}`: routes for runs that ask, with no defaults)."""
        try:
            return cls.model_validate(json.loads(text or "{}"))
        except (ValueError, ValidationError) as error:
            raise ValueError(f"--routes: {error}") from error


@dataclass(frozen=True)
class Route:
    """The route a run gets, its cluster's defaults applied."""

    gateway: GatewayReference
    hostnames: tuple[str, ...] = ()
    path: str = DEFAULT_PATH


def wanted(spec: dict[str, Any] | None, cluster: ClusterRoutes | None) -> Route | None:
    """The run's route (None: it has none), from its `spec.route` as stored.

    Raises `RouteUnavailable` when the run asks for a route the worker cannot make.
    """
    asked = RouteSpec.model_validate(spec) if spec is not None else None
    if asked is not None and not asked.enabled:
        return None
    if asked is None:
        if cluster is None or not cluster.every_run or not cluster.enabled:
            return None
        asked = RouteSpec()
    if cluster is None:
        raise RouteUnavailable(
            "spec.route: this worker does not manage HTTPRoutes (plnt worker --routes; "
            "the chart's worker.kubernetesTarget.routes.enabled)"
        )
    gateway = asked.gateway or cluster.gateway
    if gateway is None:
        raise RouteUnavailable(
            "spec.route: no Gateway to attach to: set spec.route.gateway, "
            "or the cluster's default (worker.kubernetesTarget.routes.gateway)"
        )
    hostnames = asked.hostnames if asked.hostnames is not None else cluster.hostnames or []
    return Route(gateway, tuple(hostnames), asked.path or cluster.path or DEFAULT_PATH)


def route_name(run: RunRef) -> str:
    """The run's HTTPRoute: named as the run (a valid object name already), in its namespace."""
    return run.name


def run_label(name: str) -> str:
    """The `plnt.work/run` label value, as the workflow-runner chart makes it
    (`runner.runLabel`: a name over 63 characters is cut to 52 and keeps a hash)."""
    if len(name) <= 63:
        return name
    head = re.sub(r"[-.]+$", "", name[:52])
    return f"{head}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def labels(run: RunRef) -> dict[str, str]:
    """What selects a run's route (the same labels as its releases' objects)."""
    return {
        "app.kubernetes.io/managed-by": "plnt",
        "app.kubernetes.io/part-of": "plnt",
        "plnt.work/run": run_label(run.name),
        "plnt.work/run-uid": run.uid,
    }


def http_route(
    run: RunRef, route: Route, backends: list[RouteBackend], *, port: int = 80
) -> dict[str, Any]:
    """The HTTPRoute sending `route`'s traffic to `backends` (each revision's Service)."""
    gateway = route.gateway
    parent: dict[str, Any] = {"group": GROUP, "kind": "Gateway", "name": gateway.name}
    if gateway.namespace:
        parent["namespace"] = gateway.namespace
    if gateway.section_name:
        parent["sectionName"] = gateway.section_name
    spec: dict[str, Any] = {
        "parentRefs": [parent],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": route.path}}],
                "backendRefs": [
                    {
                        "group": "",
                        "kind": "Service",
                        "name": runners.release_name(run, backend.revision),
                        "port": port,
                        "weight": backend.weight,
                    }
                    for backend in backends
                ],
            }
        ],
    }
    if route.hostnames:
        spec["hostnames"] = list(route.hostnames)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": route_name(run),
            "namespace": run.namespace,
            "labels": labels(run),
            "annotations": {
                "plnt.work/run-namespace": run.namespace,
                "plnt.work/run-name": run.name,
            },
        },
        "spec": spec,
    }
