"""The aggregation layer of kube-apiserver (kube-aggregator), for plnt's APIService.

What `pkg/apiserver/handler_proxy.go` and `pkg/controllers` do, for registered
`APIService`s (group, version, backend URL, caBundle, service name/namespace):

* **availability**: a probe `GET /apis/<g>/<v>` as `system:kube-aggregator` in
  `system:masters`, redirects not followed, 2xx or 3xx passes; until it passes every
  proxied request gets the plain-text 503 `service unavailable`.
* **proxy**: requests under `/apis/<g>/<v>` (after authentication and authorization)
  go to the backend over TLS verified with the caBundle for the server name
  `<service>.<namespace>.svc` (overridable), presenting the front-proxy client
  certificate; the path is kept, the query re-encoded sorted as Go's
  `url.Values.Encode`, the caller's Authorization and X-Remote-* were already removed by
  authentication, and `X-Remote-User`, `X-Remote-Uid`, one `X-Remote-Group` per group
  and `X-Remote-Extra-<escaped key>` per value are set (client-go
  `SetAuthProxyHeaders`). The proxying runs under kube-apiserver's request timeout
  (`timeouts`, applied by the server's filter chain), so a backend that is slow to
  answer a request that is not long-running is cut there. Responses stream back
  unbuffered; a 3xx with a Location is replaced by a 502
  (`--aggregator-reject-forwarding-redirect`); a connection failure is
  a plain-text 503 with the error.
* **discovery**: the backend's `/apis` is fetched as `system:kube-aggregator` asking
  for v2 only, with `If-None-Match`; a 200 in v2 keeps only this APIService's
  group/version, anything else falls back to the legacy `GET /apis/<g>/<v>`; a failure
  marks the version `Stale`.
* **OpenAPI**: `/openapi/v3` of the backend is fetched as `system:aggregator` without
  Accept and its path keys copied into the cluster's root; `/openapi/v3/apis/<g>/<v>` is
  proxied unchanged with the caller's identity; `/openapi/v2` paths under `/apis/<g>/<v>/`
  are merged in.

Approximations: discovery and the OpenAPI root are fetched when asked (with the ETag
cache) instead of every minute, and the probe runs at registration and on
`recheck()` instead of every 30 s; upgrade (SPDY/WebSocket) requests are not proxied.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.kube import discovery, identity
from tests.support.kube.attributes import SYSTEM_MASTERS, User

Obj = dict[str, Any]
_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip
AGGREGATOR_DISCOVERY_USER = User("system:kube-aggregator", groups=(SYSTEM_MASTERS,))
AGGREGATOR_LEGACY_USER = User("system:kube-aggregator")
AGGREGATOR_OPENAPI_USER = User("system:aggregator")


@dataclass
class APIService:
    """apiregistration.k8s.io/v1 APIService, with the backend's reachable URL."""

    group: str
    version: str
    url: str  # where <service>.<namespace>.svc:<port> resolves to, e.g. https://127.0.0.1:6443
    ca_bundle: bytes
    service_name: str = "plnt-apiserver"
    service_namespace: str = "plnt-system"
    server_name: str = ""  # default <service>.<namespace>.svc
    group_priority_minimum: int = 1000
    version_priority: int = 15
    available: bool = False
    unavailable_reason: str = "not checked yet"
    _discovery_etag: str = ""
    _discovery_cache: Obj | None = None

    @property
    def name(self) -> str:
        return f"{self.version}.{self.group}"

    @property
    def tls_server_name(self) -> str:
        return self.server_name or f"{self.service_name}.{self.service_namespace}.svc"


def header_key_escape(key: str) -> str:
    """client-go's headerKeyEscape: %-encode bytes that are not legal in a header name."""
    legal = set("!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    return "".join(chr(b) if chr(b) in legal else f"%{b:02X}" for b in key.encode())


def identity_headers(user: User) -> list[tuple[str, str]]:
    headers = [("X-Remote-User", user.name)]
    if user.uid:
        headers.append(("X-Remote-Uid", user.uid))
    headers.extend(("X-Remote-Group", group) for group in user.groups)
    for key, values in user.extra.items():
        headers.extend((f"X-Remote-Extra-{header_key_escape(key)}", value) for value in values)
    return headers


def go_query_encode(query: Mapping[str, str] | Any) -> str:
    """url.Values.Encode: keys sorted, values in order, QueryEscape'd."""
    pairs = sorted(query.items(), key=lambda kv: kv[0])
    return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote_plus)


class _TrackingConnector(aiohttp.TCPConnector):
    """A connector that hands every connection it makes to `on_connect`, also one whose
    request is then cancelled before an answer (that one no response ever holds)."""

    def __init__(self, on_connect: Callable[[Any], None], **options: Any) -> None:
        super().__init__(**options)
        self._on_connect = on_connect

    async def _create_connection(self, *args: Any, **kwargs: Any) -> Any:
        protocol = await super()._create_connection(*args, **kwargs)
        self._on_connect(protocol)
        return protocol


class Aggregator:
    """Registered APIServices and the proxy to them; lives on the stand-in's loop."""

    def __init__(self, *, client_cert: Path, client_key: Path) -> None:
        self.client_cert, self.client_key = client_cert, client_key
        self.services: dict[tuple[str, str], APIService] = {}
        self._session: aiohttp.ClientSession | None = None
        # Every connection to a backend until its socket is gone: one closed on release
        # (force_close, a proxied watch cut off, a request cancelled at its deadline
        # before the backend answered) is still in TLS's close_notify exchange, which
        # the session does not wait for.
        self._open: dict[asyncio.Future[None], asyncio.Transport] = {}

    async def close(self) -> None:
        """Close the session and every backend connection, here on the stand-in's loop."""
        if self._session is not None:
            await self._session.close()
        for transport in self._open.values():
            transport.abort()
        await asyncio.gather(*self._open, return_exceptions=True)

    def _track(self, protocol: Any) -> None:
        """Remember a new backend connection until its socket is gone."""
        closed, transport = getattr(protocol, "closed", None), protocol.transport
        if transport is not None and closed is not None and not closed.done():
            self._open[closed] = transport
            closed.add_done_callback(self._forget)

    def _forget(self, closed: asyncio.Future[None]) -> None:
        self._open.pop(closed, None)
        if not closed.cancelled():
            closed.exception()  # retrieved: a lost connection is no error of the stand-in

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = _TrackingConnector(self._track, force_close=True)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        return self._session

    def _ssl(self, service: APIService) -> ssl.SSLContext:
        # Built per request so a rotated front-proxy certificate is used at once.
        context = ssl.create_default_context(cadata=service.ca_bundle.decode())
        context.load_cert_chain(self.client_cert, self.client_key)
        return context

    def find(self, group: str, version: str) -> APIService | None:
        return self.services.get((group, version))

    def groups(self) -> dict[str, list[APIService]]:
        out: dict[str, list[APIService]] = {}
        for service in sorted(self.services.values(), key=lambda s: -s.version_priority):
            out.setdefault(service.group, []).append(service)
        return out

    async def register(self, service: APIService) -> APIService:
        self.services[(service.group, service.version)] = service
        await self.recheck(service)
        return service

    def unregister(self, group: str, version: str) -> None:
        self.services.pop((group, version), None)

    async def _call(
        self,
        service: APIService,
        method: str,
        path_qs: str,
        user: User,
        headers: Mapping[str, str] | None = None,
        *,
        deadline: float = 5.0,
    ) -> tuple[int, Mapping[str, str], bytes]:
        sent = [*(headers or {}).items(), *identity_headers(user)]
        async with self._client().request(
            method,
            service.url + path_qs,
            headers=sent,
            ssl=self._ssl(service),
            server_hostname=service.tls_server_name,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=deadline),
        ) as response:
            return response.status, dict(response.headers), await response.read()

    async def recheck(self, service: APIService) -> bool:
        """The availability probe (remote_available_controller)."""
        path = f"/apis/{service.group}/{service.version}"
        try:
            status, _, _ = await self._call(service, "GET", path, AGGREGATOR_DISCOVERY_USER)
        except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError) as error:
            service.available, service.unavailable_reason = (
                False,
                f"failing or missing response from {service.url}{path}: {error}",
            )
            return False
        service.available = 200 <= status < 400
        service.unavailable_reason = (
            ""
            if service.available
            else f"failing or missing response from {service.url}{path}: "
            f"bad status from {service.url}{path}: {status}"
        )
        return service.available

    async def proxy(
        self, request: web.Request, service: APIService, user: User
    ) -> web.StreamResponse:
        if not service.available:
            return web.Response(status=503, text="service unavailable\n", content_type="text/plain")
        query = go_query_encode(request.query)
        target = service.url + request.path + (f"?{query}" if query else "")
        headers = [
            (k, v)
            for k, v in identity.identity_free_headers(request.headers).items()
            if k.lower() not in _HOP_BY_HOP
        ]
        headers.append(("X-Forwarded-For", request.remote or "127.0.0.1"))
        headers.extend(identity_headers(user))
        body = await request.read() if request.can_read_body else None
        try:
            upstream = await self._client().request(
                request.method,
                target,
                headers=headers,
                data=body,
                ssl=self._ssl(service),
                server_hostname=service.tls_server_name,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                # Go's reverse proxy sends the caller's headers only: no Content-Type of
                # its own when the caller sent none (aiohttp would add octet-stream).
                skip_auto_headers=() if "Content-Type" in request.headers else ("Content-Type",),
            )
        except (aiohttp.ClientError, OSError, ssl.SSLError) as error:
            return web.Response(status=503, text=f"{error}\n", content_type="text/plain")
        async with upstream:
            if 300 <= upstream.status < 400 and upstream.headers.get("Location"):
                return web.Response(
                    status=502,
                    text="the backend attempted to redirect this request, which is not permitted\n",
                    content_type="text/plain",
                )
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers.add(key, value)
            if upstream.headers.get("Content-Length") is not None and request.method != "HEAD":
                response.content_length = int(upstream.headers["Content-Length"])
            await response.prepare(request)
            with contextlib.suppress(
                ConnectionResetError, aiohttp.ClientPayloadError, asyncio.CancelledError
            ):
                async for chunk in upstream.content.iter_any():  # stream: watch must not buffer
                    await response.write(chunk)
            await response.write_eof()
            return response

    async def discovery_v2(self, service: APIService) -> Obj:
        """This APIService's group in v2 form, `Stale` when the backend cannot say."""
        headers = {"Accept": discovery.V2_MEDIA}
        if service._discovery_etag:
            headers["If-None-Match"] = service._discovery_etag
        try:
            status, response_headers, body = await self._call(
                service, "GET", "/apis", AGGREGATOR_DISCOVERY_USER, headers
            )
            if status == 304 and service._discovery_cache is not None:
                return service._discovery_cache
            if status == 200 and discovery.wants_v2(response_headers.get("Content-Type", "")):
                document = json.loads(body)
                for item in document.get("items", []):
                    if item.get("metadata", {}).get("name") == service.group:
                        versions = [
                            v
                            for v in item.get("versions", [])
                            if v.get("version") == service.version
                        ]
                        found = {
                            "metadata": {"name": service.group, "creationTimestamp": None},
                            "versions": versions,
                        }
                        service._discovery_etag = response_headers.get("ETag", "")
                        service._discovery_cache = found
                        return found
            return await self._legacy_discovery(service)
        except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError, ValueError):
            return {
                "metadata": {"name": service.group, "creationTimestamp": None},
                "versions": [{"version": service.version, "freshness": "Stale"}],
            }

    async def _legacy_discovery(self, service: APIService) -> Obj:
        status, _, body = await self._call(
            service, "GET", f"/apis/{service.group}/{service.version}", AGGREGATOR_LEGACY_USER,
            {"Accept": "application/json"},
        )  # fmt: skip
        if status != 200:
            raise ValueError(f"legacy discovery answered {status}")
        listed = json.loads(body)
        resources: dict[str, Obj] = {}
        for entry in listed.get("resources", []):
            name, _, sub = entry["name"].partition("/")
            kind = {
                "group": entry.get("group", service.group),
                "version": entry.get("version", service.version),
                "kind": entry.get("kind", ""),
            }
            if not sub:
                resources.setdefault(name, {}).update(
                    {
                        "resource": name,
                        "responseKind": kind,
                        "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
                        "singularResource": entry.get("singularName", ""),
                        "verbs": entry.get("verbs", []),
                        **({"shortNames": entry["shortNames"]} if entry.get("shortNames") else {}),
                        **({"categories": entry["categories"]} if entry.get("categories") else {}),
                    }
                )
            else:
                resources.setdefault(name, {}).setdefault("subresources", []).append(
                    {"subresource": sub, "responseKind": kind, "verbs": entry.get("verbs", [])}
                )
        version = {
            "version": service.version,
            "resources": list(resources.values()),
            "freshness": "Current",
        }
        return {
            "metadata": {"name": service.group, "creationTimestamp": None},
            "versions": [version],
        }

    async def openapi_v3_paths(self, service: APIService) -> Obj:

        try:
            status, _, body = await self._call(
                service, "GET", "/openapi/v3", AGGREGATOR_OPENAPI_USER, deadline=10
            )
        except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError):
            return {}
        if status != 200:
            return {}
        return dict(json.loads(body).get("paths", {}))

    async def openapi_v2(self, service: APIService) -> Obj:

        try:
            status, _, body = await self._call(
                service,
                "GET",
                "/openapi/v2",
                AGGREGATOR_OPENAPI_USER,
                {"Accept": "application/json"},
                deadline=60,
            )
        except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError):
            return {}
        return json.loads(body) if status == 200 else {}
