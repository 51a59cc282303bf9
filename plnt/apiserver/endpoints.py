"""Non-resource endpoints: discovery, OpenAPI, version, health and metrics.

The self reviews behind `kubectl auth can-i` and `kubectl auth whoami` live in
`selfreview` and are registered from here.

Discovery and OpenAPI documents are computed once per app (they depend only on the
definitions of the kinds the composition root installed) and served with ETags;
clients and the aggregator revalidate with If-None-Match and get 304.
"""

from __future__ import annotations

import asyncio
import platform
import sys
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from plnt.api import errors, names
from plnt.apiserver import (
    discovery,
    keys,
    negotiation,
    openapi,
    responses,
    selfreview,
)
from plnt.registry.installed import Served
from plnt.storage import errors as storage_errors

GROUP, VERSION = names.GROUP, names.VERSION
PROTO_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@dataclass(frozen=True, slots=True)
class Document:
    body: bytes
    etag: str

    @classmethod
    def of(cls, value: dict[str, Any]) -> Document:
        return cls(responses.dumps(value), discovery.etag(value))


class Documents:
    """Every static document the server publishes, for the kinds it `served` (handed over by
    the composition root: plnt.work's and the core/v1 ones, each in its order)."""

    def __init__(self, *, server_address: str, served: Served) -> None:
        plnt, core = served.plnt, served.core
        self.apis_v2 = Document.of(discovery.aggregated(GROUP, VERSION, plnt))
        self.api_v2 = Document.of(discovery.aggregated("", "v1", core))
        self.apis = Document.of(discovery.api_group_list(GROUP, VERSION))
        self.api = Document.of(discovery.api_versions(server_address))
        self.group = Document.of(discovery.api_group(GROUP, VERSION))
        self.group_version = Document.of(discovery.resource_list(f"{GROUP}/{VERSION}", plnt))
        self.core_v1 = Document.of(discovery.resource_list("v1", core))
        v3 = openapi.v3_document(GROUP, VERSION, plnt)
        self.openapi_v3_hash = openapi.content_hash(v3)
        self.openapi_v3 = Document.of(v3)
        v3_core = openapi.v3_document("", "v1", core)
        self.openapi_v3_core = Document.of(v3_core)
        self.openapi_v3_core_hash = openapi.content_hash(v3_core)
        self.openapi_v2 = Document.of(openapi.v2_document(GROUP, VERSION, plnt))


DOCUMENTS = web.AppKey("documents", Documents)


def _send(
    request: web.Request,
    doc: Document,
    *,
    content_type: str = responses.JSON_CONTENT_TYPE,
    cache_control: str = "no-cache, private",
    vary: bool = False,
) -> web.Response:
    headers = {"ETag": doc.etag, "Cache-Control": cache_control}
    if vary:
        headers["Vary"] = "Accept"
    if request.headers.get("If-None-Match") == doc.etag:
        return web.Response(status=304, headers=headers)
    response = web.Response(body=doc.body, headers=headers)
    response.headers["Content-Type"] = content_type
    return response


def _discovery(request: web.Request, v2: Document, legacy: Document) -> web.Response:
    wants = negotiation.wants_discovery_v2(request.headers.get("Accept"))
    if wants is None:
        raise errors.NotAcceptable("only the following media types are accepted: application/json")
    if wants:
        return _send(
            request,
            v2,
            content_type=negotiation.DISCOVERY_V2_CONTENT_TYPE,
            cache_control="public",
            vary=True,
        )
    return _send(request, legacy, vary=True)


async def apis(request: web.Request) -> web.Response:
    docs = request.app[DOCUMENTS]
    return _discovery(request, docs.apis_v2, docs.apis)


async def api(request: web.Request) -> web.Response:
    docs = request.app[DOCUMENTS]
    return _discovery(request, docs.api_v2, docs.api)


async def api_group(request: web.Request) -> web.Response:
    return _send(request, request.app[DOCUMENTS].group)


async def group_version(request: web.Request) -> web.Response:
    return _send(request, request.app[DOCUMENTS].group_version)


async def core_v1(request: web.Request) -> web.Response:
    return _send(request, request.app[DOCUMENTS].core_v1)


async def openapi_v3_root(request: web.Request) -> web.Response:
    docs = request.app[DOCUMENTS]
    root = {
        "paths": {
            f"apis/{GROUP}/{VERSION}": {
                "serverRelativeURL": f"/openapi/v3/apis/{GROUP}/{VERSION}?hash="
                f"{docs.openapi_v3_hash}"
            },
            "api/v1": {"serverRelativeURL": f"/openapi/v3/api/v1?hash={docs.openapi_v3_core_hash}"},
        }
    }
    return _send(request, Document.of(root))


def _openapi_v3(request: web.Request, doc: Document, current_hash: str) -> web.Response:
    accept = negotiation.parse_accept(request.headers.get("Accept"))
    if not any(m.is_json for m in accept):
        raise errors.NotAcceptable("only the following media types are accepted: application/json")
    # A stale ?hash= gets the current document with 200 (never a redirect: the
    # aggregator turns 3xx into 502), and only a matching hash is immutable.
    immutable = request.query.get("hash") == current_hash
    cache = "public, immutable" if immutable else "no-cache, private"
    response = _send(request, doc, cache_control=cache, vary=True)
    if immutable:
        response.headers["Expires"] = "Thu, 31 Dec 2099 00:00:00 GMT"
    return response


async def openapi_v3_group(request: web.Request) -> web.Response:
    docs = request.app[DOCUMENTS]
    return _openapi_v3(request, docs.openapi_v3, docs.openapi_v3_hash)


async def openapi_v3_core(request: web.Request) -> web.Response:
    docs = request.app[DOCUMENTS]
    return _openapi_v3(request, docs.openapi_v3_core, docs.openapi_v3_core_hash)


async def openapi_v2(request: web.Request) -> web.Response:
    accept = negotiation.parse_accept(request.headers.get("Accept"))
    if not any(m.is_json for m in accept):
        # kubectl asks for protobuf only; it uses v3 when that exists, so a 406 is honest.
        raise errors.NotAcceptable("only the following media types are accepted: application/json")
    return _send(request, request.app[DOCUMENTS].openapi_v2, vary=True)


async def version(request: web.Request) -> web.Response:
    git_version = request.app[keys.SETTINGS].version
    major, minor = git_version.lstrip("v").split(".")[:2]
    return responses.json_response(
        {
            "major": major,
            "minor": minor,
            "gitVersion": git_version,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
            "compiler": platform.python_implementation().lower(),
            "platform": f"{sys.platform}/{platform.machine()}",
        }
    )


async def _health(request: web.Request, endpoint: str, checks: dict[str, bool]) -> web.Response:
    excluded = set(request.query.getall("exclude", []))
    lines, failed = [], False
    for name, ok in checks.items():
        if name in excluded:
            lines.append(f"[+]{name} excluded: ok")
            continue
        lines.append(f"[+]{name} ok" if ok else f"[-]{name} failed: reason withheld")
        failed = failed or not ok
    if failed:
        text = "\n".join(lines) + f"\n{endpoint} check failed\n"
        return web.Response(status=500, text=text, content_type="text/plain", charset="utf-8")
    text = "\n".join(lines) + f"\n{endpoint} check passed\n" if "verbose" in request.query else "ok"
    return web.Response(text=text, content_type="text/plain", charset="utf-8")


async def livez(request: web.Request) -> web.Response:
    return await _health(request, "livez", {"ping": True})


async def _etcd_answers(request: web.Request) -> bool:
    """A real round trip to etcd (kube's etcd check), bounded so a probe never hangs."""
    if keys.STORAGE not in request.app:
        return False
    try:
        async with asyncio.timeout(2):
            await request.app[keys.STORAGE].current_revision()
    except (TimeoutError, storage_errors.StorageError):
        return False
    return True


async def _checks(request: web.Request) -> dict[str, bool]:
    ready: dict[str, bool] = request.app[keys.READY]
    return {
        "ping": True,
        **ready,
        "etcd": ready.get("etcd", False) and await _etcd_answers(request),
    }


async def readyz(request: web.Request) -> web.Response:
    return await _health(request, "readyz", await _checks(request))


async def healthz(request: web.Request) -> web.Response:
    return await _health(request, "healthz", await _checks(request))


async def metrics(request: web.Request) -> web.Response:
    """This process's metrics; on one of several workers, every worker's, by `worker`."""
    peers = request.app.get(keys.PEERS)
    body = request.app[keys.METRICS].exposition() if peers is None else await peers.exposition()
    response = web.Response(body=body)
    response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
    return response


def add_routes(app: web.Application, *, standalone: bool = False) -> None:
    """Non-resource routes; `standalone`: no cluster answers for core/v1, plnt does."""
    r = app.router
    r.add_get("/apis", apis)
    r.add_get("/apis/", apis)
    r.add_get("/api", api)
    r.add_get("/api/", api)
    r.add_get(f"/apis/{GROUP}", api_group)
    r.add_get(f"/apis/{GROUP}/", api_group)
    r.add_get(f"/apis/{GROUP}/{VERSION}", group_version)
    r.add_get(f"/apis/{GROUP}/{VERSION}/", group_version)
    r.add_get("/api/v1", core_v1)
    r.add_get("/api/v1/", core_v1)
    r.add_get("/openapi/v3", openapi_v3_root)
    r.add_get(f"/openapi/v3/apis/{GROUP}/{VERSION}", openapi_v3_group)
    r.add_get("/openapi/v3/api/v1", openapi_v3_core)
    r.add_get("/openapi/v2", openapi_v2)
    r.add_get("/version", version)
    r.add_get("/healthz", healthz)
    r.add_get("/livez", livez)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    selfreview.add_routes(app, rules=standalone)
