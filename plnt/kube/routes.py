"""Gateway API HTTPRoutes (gateway.networking.k8s.io/v1), through kubernetes-asyncio.

The Kubernetes target keeps one HTTPRoute per routed run and moves its weights with
server-side apply: the worker's field manager owns the route's spec, labels and
annotations, so a retried move is the same apply and another manager's fields (a
Gateway controller writes `status`) are left alone. `force` takes back fields a person
changed by hand, as a controller does. Objects come back as the API's JSON. Errors:
`ClusterUnavailable`, naming the call and kube's answer (a 422 carries the fields that
broke the Gateway API's schema).
"""

from __future__ import annotations

import json
from typing import Any, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from plnt.kube import errors

Object = dict[str, Any]
GROUP = "gateway.networking.k8s.io"
VERSION = "v1"
PLURAL = "httproutes"
FIELD_MANAGER = "plnt-worker"
APPLY = "application/apply-patch+yaml"


class HTTPRoutes:
    """HTTPRoutes of one cluster."""

    def __init__(self, api: client.ApiClient, *, field_manager: str = FIELD_MANAGER) -> None:
        self._custom = client.CustomObjectsApi(api)
        self._manager = field_manager

    async def get(self, namespace: str, name: str) -> Object | None:
        """The route, or None when it does not exist."""
        try:
            found = await self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise _failed(f"httproutes {namespace}/{name}", error) from error
        except errors.CALL_FAILURES as error:
            raise _failed(f"httproutes {namespace}/{name}", error) from error
        return cast(Object, found)

    async def apply(self, route: Object) -> Object:
        """Create or update `route` by server-side apply (JSON is YAML)."""
        meta = route["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        # The stubs leave out `_content_type`, which the generated client takes: without
        # it a custom object's patch is sent as a JSON patch, never as an apply.
        patch: Any = self._custom.patch_namespaced_custom_object
        try:
            applied = await patch(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                route,
                field_manager=self._manager,
                force=True,
                _content_type=APPLY,
            )
        except errors.CALL_FAILURES as error:
            raise _failed(f"apply httproutes {namespace}/{name}", error) from error
        if applied is None:  # the client decodes no body for 201 Created (an apply that created)
            found = await self.get(namespace, name)
            if found is None:
                raise errors.ClusterUnavailable(f"apply httproutes {namespace}/{name}: gone")
            return found
        return cast(Object, applied)

    async def delete(self, namespace: str, name: str, *, uid: str | None = None) -> bool:
        """Remove the route; False when there was none. With `uid`, only that object
        (a precondition: a route recreated under the name for another run stays)."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        try:
            if uid:
                await self._custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, body=options
                )
            else:
                await self._custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name
                )
        except ApiException as error:
            if error.status in (404, 409):  # gone, or another object's uid now
                return False
            raise _failed(f"delete httproutes {namespace}/{name}", error) from error
        except errors.CALL_FAILURES as error:
            raise _failed(f"delete httproutes {namespace}/{name}", error) from error
        return True

    async def list(self, namespace: str, selector: str) -> list[Object]:
        try:
            found = await self._custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, label_selector=selector
            )
        except errors.CALL_FAILURES as error:
            raise _failed(f"httproutes in {namespace}", error) from error
        return [cast(Object, item) for item in found.get("items") or []]


def _failed(call: str, error: Exception) -> errors.ClusterUnavailable:
    """`ClusterUnavailable` with kube's own message when it sent one (which field broke
    the schema, which RBAC rule is missing)."""
    if isinstance(error, ApiException) and error.body:
        try:
            message = json.loads(error.body).get("message")
        except (ValueError, AttributeError):
            message = None
        if message:
            return errors.ClusterUnavailable(
                f"{call}: kube-apiserver answered {error.status}: {message}"
            )
    return errors.unavailable(call, error)
