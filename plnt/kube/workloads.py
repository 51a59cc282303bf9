"""The workload objects the Kubernetes target reads and steers, through kubernetes-asyncio.

A revision's runners are one Deployment and one Service (from the workflow-runner
chart); the target waits on the Deployment's status, explains a failure from its Pods'
states, reads ready endpoints from the Service's EndpointSlices, and scales through the
Deployment's `scale` subresource. Objects come back as the API's JSON (camelCase dicts).
Errors: `ClusterUnavailable`, naming the call.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from plnt.kube import errors

Object = dict[str, Any]


class Workloads:
    """Deployments, Pods and EndpointSlices of one cluster."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._apps = client.AppsV1Api(api)
        self._core = client.CoreV1Api(api)
        self._discovery = client.DiscoveryV1Api(api)

    def _json(self, model: Any) -> Object:
        result: Object = self._api.sanitize_for_serialization(model)
        return result

    async def deployment(self, namespace: str, name: str) -> Object | None:
        """The Deployment, or None when it does not exist."""
        try:
            return self._json(await self._apps.read_namespaced_deployment(name, namespace))
        except ApiException as error:
            if error.status == 404:
                return None
            raise errors.unavailable(f"deployments {namespace}/{name}", error) from error
        except errors.CALL_FAILURES as error:
            raise errors.unavailable(f"deployments {namespace}/{name}", error) from error

    async def deployments(self, namespace: str, selector: str) -> list[Object]:
        try:
            found = await self._apps.list_namespaced_deployment(namespace, label_selector=selector)
        except errors.CALL_FAILURES as error:
            raise errors.unavailable(f"deployments in {namespace}", error) from error
        return [self._json(item) for item in found.items]

    async def nodes(self) -> list[Object]:
        try:
            found = await self._core.list_node()
        except errors.CALL_FAILURES as error:
            raise errors.unavailable("nodes", error) from error
        return [self._json(item) for item in found.items]

    async def scheduled_pods(self) -> list[Object]:
        """Pods in every namespace (the caller counts those bound and not finished)."""
        try:
            found = await self._core.list_pod_for_all_namespaces()
        except errors.CALL_FAILURES as error:
            raise errors.unavailable("pods", error) from error
        return [self._json(item) for item in found.items]

    async def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Set the Deployment's replicas through its `scale` subresource."""
        body = {"spec": {"replicas": replicas}}
        try:
            await self._apps.patch_namespaced_deployment_scale(name, namespace, body)
        except errors.CALL_FAILURES as error:
            raise errors.unavailable(f"deployments/scale {namespace}/{name}", error) from error

    async def pods(self, namespace: str, selector: str) -> list[Object]:
        try:
            found = await self._core.list_namespaced_pod(namespace, label_selector=selector)
        except errors.CALL_FAILURES as error:
            raise errors.unavailable(f"pods in {namespace}", error) from error
        return [self._json(item) for item in found.items]

    async def endpoints(self, namespace: str, service: str) -> list[str]:
        """Base URLs (`http://ADDRESS:PORT`) of the Service's ready endpoints, sorted.

        Read from the EndpointSlices labelled with the Service's name; the port is the
        slice's (named `http`, else its first), never assumed from the Service.
        """
        selector = f"kubernetes.io/service-name={service}"
        try:
            found = await self._discovery.list_namespaced_endpoint_slice(
                namespace, label_selector=selector
            )
        except errors.CALL_FAILURES as error:
            raise errors.unavailable(f"endpointslices of {namespace}/{service}", error) from error
        urls: set[str] = set()
        for item in found.items:
            ports = item.ports or []
            named = [p.port for p in ports if p.name == "http" and p.port]
            port = named[0] if named else next((p.port for p in ports if p.port), None)
            if port is None:
                continue
            for endpoint in item.endpoints or []:
                conditions = endpoint.conditions
                if conditions is not None and conditions.ready is False:
                    continue
                for address in endpoint.addresses or []:
                    host = f"[{address}]" if ":" in address else address
                    urls.add(f"http://{host}:{port}")
        return sorted(urls)
