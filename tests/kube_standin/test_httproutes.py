"""HTTPRoute (gateway.networking.k8s.io/v1) in the stand-in, held to the Gateway API's schemas.

plnt's own client (`plnt.kube.routes.HTTPRoutes`, kubernetes-asyncio) applies the route the
Kubernetes target builds (`plnt.sagas.targets.routes`); the stand-in validates it with the
validators `@kubernetes-models/gateway-api` generates from the Gateway API's types.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client as k8s

from plnt.api.workflowruns import GatewayReference
from plnt.kube import errors
from plnt.kube.routes import HTTPRoutes
from plnt.sagas import routing
from plnt.sagas.targets import routes
from plnt.sagas.values import RunRef
from tests.support.kube import standin

ADMIN = "admin-token-httproutes"


@pytest.fixture
def namespace(kube: standin.KubeStandIn) -> str:
    kube.add_user(ADMIN, "cluster-admin", ["system:masters"])
    name = f"rt-{uuid.uuid4().hex[:8]}"
    kube.add_namespace(name)
    return name


@pytest.fixture
async def http_routes(kube: standin.KubeStandIn) -> AsyncIterator[HTTPRoutes]:
    configuration = k8s.Configuration(host=kube.url)
    configuration.ssl_ca_cert = str(kube.ca_cert)
    configuration.api_key = {"BearerToken": ADMIN}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    async with k8s.ApiClient(configuration) as api:
        yield HTTPRoutes(api)


ROUTE = routes.Route(
    GatewayReference(name="public", namespace="gateways", section_name="https"),
    ("models.example.com",),
    "/chat",
)


async def test_a_route_is_applied_then_its_weights_move_by_applying_again(
    http_routes: HTTPRoutes, namespace: str
) -> None:
    run = RunRef(namespace, "chat", "uid-1")
    first = routes.http_route(run, ROUTE, routing.canary(1, 2, 10))
    created = await http_routes.apply(first)
    assert created["spec"] == first["spec"]
    assert created["metadata"]["labels"]["plnt.work/run-uid"] == "uid-1"
    assert created["metadata"]["generation"] == 1

    await http_routes.apply(routes.http_route(run, ROUTE, routing.promoted(2, 1)))
    moved = await http_routes.get(namespace, "chat")
    assert moved is not None and moved["metadata"]["generation"] == 2
    backends = moved["spec"]["rules"][0]["backendRefs"]
    assert [(b["name"], b["weight"]) for b in backends] == [("chat-r2", 100), ("chat-r1", 0)]
    managers = {m["manager"] for m in moved["metadata"]["managedFields"]}
    assert managers == {"plnt-worker"}

    assert await http_routes.delete(namespace, "chat", uid=moved["metadata"]["uid"]) is True
    assert await http_routes.get(namespace, "chat") is None
    assert await http_routes.delete(namespace, "chat") is False


async def test_a_route_that_breaks_the_gateway_api_schema_is_refused_naming_each_field(
    http_routes: HTTPRoutes, namespace: str
) -> None:
    run = RunRef(namespace, "bad", "uid-2")
    route = routes.http_route(run, ROUTE, [])
    backend = {"group": "", "kind": "Service", "name": "bad-r1", "port": 80, "weight": -1}
    route["spec"]["rules"][0]["backendRefs"] = [backend]
    route["spec"]["hostnames"] = ["Not A Host"]
    with pytest.raises(errors.ClusterUnavailable) as refused:
        await http_routes.apply(route)
    message = str(refused.value)
    assert "422" in message
    assert "spec.rules[0].backendRefs[0].weight" in message
    assert "spec.hostnames[0]" in message
    assert await http_routes.get(namespace, "bad") is None
