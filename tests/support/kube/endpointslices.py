"""The EndpointSlice controller of the kubelet simulator.

Part of the kube-apiserver stand-in (a test double: no cluster runs here).

A real cluster gives every pod an IP of its own and one port number per service port,
so one slice holds many endpoints. Here every pod is 127.0.0.1 on a port of its own; kube's
controller puts endpoints whose ports resolve differently into different slices, so each
pod whose port is known gets its own slice (`<service>-<hash>`, generateName
`<service>-`), with that pod's real port in `ports` and `ready`/`serving` from the pod's
Ready condition. Consumers must read the port from the slice, never from the Service.
Services without a selector get no slices; slices of deleted pods and Services go.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from tests.support.kube import deployments, kinds, resources, statuses

Obj = dict[str, Any]
MANAGER = deployments.MANAGER


class EndpointSliceController:
    """Keeps one slice per selected pod with a known port, for every Service."""

    def __init__(
        self,
        api: resources.Resources,
        pods: Mapping[str, Any],
        real_port: Callable[[Any, Any], int | None],
    ) -> None:
        self.api, self.store, self.pods, self.real_port = api, api.store, pods, real_port

    def sync(self) -> None:
        wanted: dict[tuple[str, str], Obj] = {}
        for service in self.store.list("services"):
            selector = (service.get("spec") or {}).get("selector")
            if not selector:
                continue
            namespace = service["metadata"]["namespace"]
            for pod in self.store.list("pods", namespace):
                runtime = self.pods.get(pod["metadata"]["uid"])
                if runtime is None or not all(
                    deployments.labels(pod).get(k) == v for k, v in selector.items()
                ):
                    continue
                ports = self._slice_ports(service, runtime)
                if ports is None:
                    continue
                suffix = hashlib.sha256(runtime.uid.encode()).hexdigest()[:5]
                name = f"{service['metadata']['name']}-{suffix}"
                wanted[(namespace, name)] = _slice(service, pod, name, ports)
        for existing in self.store.list("endpointslices"):
            key = (existing["metadata"]["namespace"], existing["metadata"]["name"])
            if _managed(existing) and key not in wanted:
                with contextlib.suppress(statuses.StatusError):
                    self.api.delete(kinds.ENDPOINT_SLICES, *key)
        for (namespace, name), obj in wanted.items():
            current = self.store.get("endpointslices", namespace, name)
            with contextlib.suppress(statuses.StatusError):
                if current is None:
                    self.api.create(kinds.ENDPOINT_SLICES, namespace, obj, manager=MANAGER)
                elif (current.get("endpoints"), current.get("ports")) != (
                    obj["endpoints"],
                    obj["ports"],
                ):
                    self.api.update(
                        kinds.ENDPOINT_SLICES,
                        namespace,
                        name,
                        {
                            **kinds.ENDPOINT_SLICES.wire(current),
                            "endpoints": obj["endpoints"],
                            "ports": obj["ports"],
                        },
                        manager=MANAGER,
                    )

    def _slice_ports(self, service: Obj, runtime: Any) -> list[Obj] | None:
        out = []
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            real = None
            for container in runtime.containers.values():
                declared = {p.get("name") for p in container.spec.get("ports") or []}
                numbers = {p["containerPort"] for p in container.spec.get("ports") or []}
                if (isinstance(target, str) and target in declared) or target in numbers:
                    real = self.real_port(container, target)
            if real is None:
                return None
            out.append(
                {
                    "name": port.get("name", ""),
                    "port": real,
                    "protocol": port.get("protocol", "TCP"),
                }
            )
        return out


def _slice(service: Obj, pod: Obj, name: str, ports: list[Obj]) -> Obj:
    svc = service["metadata"]
    ready = deployments.pod_ready(pod)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "generateName": f"{svc['name']}-",
            "namespace": svc["namespace"],
            "labels": {
                "kubernetes.io/service-name": svc["name"],
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": svc["name"],
                    "uid": svc["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": ["127.0.0.1"],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "nodeName": pod["spec"].get("nodeName", ""),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": svc["namespace"],
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            }
        ],
        "ports": ports,
    }


def _managed(obj: Obj) -> bool:
    labels = deployments.labels(obj)
    return labels.get("endpointslice.kubernetes.io/managed-by") == "endpointslice-controller.k8s.io"
