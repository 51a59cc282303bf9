"""The aggregation proxy: front-proxy certificate, X-Remote-* headers, no user token upstream."""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from tests.support import tls
from tests.support.kube import discovery, policy, standin
from tests.support.kube.backends import backend_context
from tests.support.kube.clients import session


def echo_backend() -> web.Application:
    async def echo(request: web.Request) -> web.Response:
        seen = {
            "path": request.path_qs,
            "user": request.headers.getall("X-Remote-User", []),
            "groups": request.headers.getall("X-Remote-Group", []),
            "extra": {
                k.lower(): request.headers.getall(k)
                for k in request.headers
                if k.lower().startswith("x-remote-extra-")
            },
            "authorization": request.headers.get("Authorization"),
            "peer": request.transport.get_extra_info("peercert")["subject"]
            if request.transport
            else None,
        }
        return web.json_response({"kind": "Echo", "apiVersion": "plnt.work/v1", "seen": seen})

    async def apis(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def resources(request: web.Request) -> web.Response:
        echoes = {
            "name": "echoes",
            "singularName": "echo",
            "namespaced": True,
            "kind": "Echo",
            "verbs": ["get", "list"],
        }
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": "plnt.work/v1",
                "resources": [echoes],
            }
        )

    app = web.Application()
    app.router.add_get("/apis", apis)
    app.router.add_get("/apis/plnt.work/v1", resources)
    app.router.add_route("*", "/apis/plnt.work/v1/{tail:.+}", echo)
    return app


async def test_the_aggregator_proxies_with_the_front_proxy_certificate_and_the_users_identity(
    kube: standin.KubeStandIn, token: str, tmp_path: Path
) -> None:
    kube.add_user(token, "dora", ["team-a"], extra={"acme.com/project": ["p1", "p2"]})
    kube.allow(
        policy.Rule(
            verbs=("*",), user="dora", api_groups=("plnt.work",), resources=("*",), name="plnt-edit"
        )
    )
    context, ca_bundle = backend_context(kube, tmp_path)
    async with tls.serve_https(echo_backend(), context) as backend_url:
        service = await kube.register_apiservice_async(
            backend_url, ca_bundle, service_name="echo-api"
        )
        assert service.available, service.unavailable_reason
        try:
            async with session(kube, token) as client:
                async with client.get(
                    "/apis/plnt.work/v1/namespaces/ns/echoes/x?b=2&a=1"
                ) as response:
                    echoed = (await response.json())["seen"]
                async with client.get("/apis/plnt.work") as response:
                    group = await response.json()
                headers = {"Accept": discovery.V2_MEDIA}
                async with client.get("/apis", headers=headers) as response:
                    aggregated = json.loads(await response.read())
                    content_type = response.headers["Content-Type"]
        finally:
            kube.unregister_apiservice()
    assert echoed["path"] == "/apis/plnt.work/v1/namespaces/ns/echoes/x?a=1&b=2"
    assert echoed["user"] == ["dora"]
    assert echoed["groups"] == ["team-a", "system:authenticated"]
    assert echoed["extra"] == {"x-remote-extra-acme.com%2fproject": ["p1", "p2"]}
    assert echoed["authorization"] is None
    assert echoed["peer"] == [[["commonName", "front-proxy-client"]]]
    assert group == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "plnt.work",
        "versions": [{"groupVersion": "plnt.work/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "plnt.work/v1", "version": "v1"},
    }
    assert content_type == discovery.V2_MEDIA
    plnt = next(i for i in aggregated["items"] if i["metadata"].get("name") == "plnt.work")
    assert plnt["versions"][0]["resources"][0]["responseKind"]["kind"] == "Echo"


async def test_a_proxied_request_is_forbidden_by_the_aggregator_before_it_reaches_the_backend(
    kube: standin.KubeStandIn, token: str, tmp_path: Path
) -> None:
    kube.add_user(token, "eve")
    context, ca_bundle = backend_context(kube, tmp_path)
    async with tls.serve_https(echo_backend(), context) as backend_url:
        await kube.register_apiservice_async(backend_url, ca_bundle, service_name="echo-api")
        try:
            async with (
                session(kube, token) as client,
                client.delete("/apis/plnt.work/v1/namespaces/ns/echoes/x") as response,
            ):
                body = await response.json()
        finally:
            kube.unregister_apiservice()
    assert response.status == 403
    assert body["message"] == (
        'echoes.plnt.work "x" is forbidden: User "eve" cannot delete resource "echoes" '
        'in API group "plnt.work" in the namespace "ns"'
    )
