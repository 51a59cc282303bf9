"""Non-resource endpoints: discovery, OpenAPI, version, health and metrics, and the
self reviews (`SelfSubjectAccessReview`, `SelfSubjectReview`) behind `kubectl auth can-i`
and `kubectl auth whoami`, answered by this server's own authenticator and authorizer.

Discovery and OpenAPI documents are computed once per app (they depend only on
the resource definitions) and served with ETags; clients and the aggregator
revalidate with If-None-Match and get 304.
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import authn, authz, discovery, keys, negotiation, openapi, params, responses
from plnt.registry.catalog import CORE_RESOURCES, PLNT_RESOURCES
from plnt.registry.definitions import ResourceDefinition
from plnt.storage import errors as storage_errors

GROUP, VERSION = "plnt.work", "v1"
PROTO_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@dataclass(frozen=True, slots=True)
class Document:
    body: bytes
    etag: str

    @classmethod
    def of(cls, value: dict[str, Any]) -> Document:
        return cls(responses.dumps(value), discovery.etag(value))


class Documents:
    """Every static document the server publishes."""

    def __init__(self, *, server_address: str) -> None:
        plnt: tuple[ResourceDefinition, ...] = PLNT_RESOURCES
        self.apis_v2 = Document.of(discovery.aggregated(GROUP, VERSION, plnt))
        self.api_v2 = Document.of(discovery.aggregated("", "v1", CORE_RESOURCES))
        self.apis = Document.of(discovery.api_group_list(GROUP, VERSION))
        self.api = Document.of(discovery.api_versions(server_address))
        self.group = Document.of(discovery.api_group(GROUP, VERSION))
        self.group_version = Document.of(discovery.resource_list(f"{GROUP}/{VERSION}", plnt))
        self.core_v1 = Document.of(discovery.resource_list("v1", CORE_RESOURCES))
        v3 = openapi.v3_document(GROUP, VERSION, plnt)
        self.openapi_v3_hash = openapi.content_hash(v3)
        self.openapi_v3 = Document.of(v3)
        self.openapi_v3_core = Document.of(openapi.v3_document("", "v1", CORE_RESOURCES))
        self.openapi_v3_core_hash = openapi.content_hash(
            openapi.v3_document("", "v1", CORE_RESOURCES)
        )
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


async def namespace(request: web.Request) -> web.Response:
    """Standalone plnt has no Namespace objects: every namespace exists and is Active.

    kubectl looks a namespace up after a NotFound to tell "no such namespace" from
    "no such object"; answering here keeps its message about the object.
    """
    name = request.match_info["name"]
    return responses.json_response(
        {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": name},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
    )


async def metrics(request: web.Request) -> web.Response:
    body = request.app[keys.METRICS].exposition()
    response = web.Response(body=body)
    response.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
    return response


# --- self reviews: what `kubectl auth can-i` and `kubectl auth whoami` ask ---------------

AUTHORIZATION_V1 = "authorization.k8s.io/v1"
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
SELF_REVIEW_PATHS = frozenset(
    {
        f"/apis/{AUTHORIZATION_V1}/selfsubjectaccessreviews",
        f"/apis/{AUTHENTICATION_V1}/selfsubjectreviews",
    }
)


PROTOBUF = "application/vnd.kubernetes.protobuf"
_PROTOBUF_MAGIC = b"k8s\x00"
# Field numbers of the generated k8s.io/api protobuf messages a self review carries.
_RESOURCE_ATTRIBUTES = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_ATTRIBUTES = ("path", "verb")


def _proto_fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of one protobuf message (the last of each number wins).

    Self reviews hold only strings and nested messages, so varints and fixed-width
    fields are skipped rather than decoded.
    """
    fields: dict[int, bytes] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise errors.BadRequest("the protobuf body of the request is truncated")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size = varint()
            if pos + size > len(data):
                raise errors.BadRequest("the protobuf body of the request is truncated")
            fields[number] = data[pos : pos + size]
            pos += size
        else:
            raise errors.BadRequest(f"unsupported protobuf wire type {wire}")
    return fields


def _proto_strings(data: bytes, names: tuple[str, ...]) -> dict[str, str]:
    fields = _proto_fields(data)
    return {
        name: fields[number].decode("utf-8", "replace")
        for number, name in enumerate(names, start=1)
        if number in fields
    }


def _decode_protobuf_review(data: bytes) -> dict[str, Any]:
    """A self review sent as kube protobuf: the `k8s\\0` envelope around runtime.Unknown."""
    if not data.startswith(_PROTOBUF_MAGIC):
        raise errors.BadRequest("the protobuf body of the request lacks the k8s envelope")
    raw = _proto_fields(data[len(_PROTOBUF_MAGIC) :]).get(2, b"")
    spec_fields = _proto_fields(_proto_fields(raw).get(2, b""))
    spec: dict[str, Any] = {}
    if 1 in spec_fields:
        spec["resourceAttributes"] = _proto_strings(spec_fields[1], _RESOURCE_ATTRIBUTES)
    if 2 in spec_fields:
        spec["nonResourceAttributes"] = _proto_strings(spec_fields[2], _NON_RESOURCE_ATTRIBUTES)
    return {"spec": spec}


async def _review_body(request: web.Request, kind: str) -> dict[str, Any]:
    """The review as JSON, or as the protobuf typed clients (`kubectl auth`) send first."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in ("", negotiation.JSON, PROTOBUF):
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            f"application/json, {PROTOBUF}"
        )
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    data = await params.read_body(request, limit=limit)
    if media == PROTOBUF:
        return _decode_protobuf_review(data)
    try:
        body = json.loads(data) if data.strip() else {}
    except ValueError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error
    if not isinstance(body, dict) or body.get("kind") not in (None, "", kind):
        raise errors.BadRequest(f"the request body must be a {kind}")
    return body


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


async def self_subject_access_review(request: web.Request) -> web.Response:
    """Ask the server's own authorizer about the caller, as kube-apiserver does (201)."""
    body = await _review_body(request, "SelfSubjectAccessReview")
    raw_spec = body.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    user: authn.UserInfo = request[keys.USER]
    if isinstance(resource, dict):
        attributes = authz.Attributes(
            user=user,
            verb=_text(resource.get("verb")),
            resource_request=True,
            path="",
            api_group=_text(resource.get("group")),
            api_version=_text(resource.get("version")),
            namespace=_text(resource.get("namespace")),
            resource=_text(resource.get("resource")),
            subresource=_text(resource.get("subresource")),
            name=_text(resource.get("name")),
        )
    elif isinstance(non_resource, dict):
        attributes = authz.Attributes(
            user=user,
            verb=_text(non_resource.get("verb")),
            resource_request=False,
            path=_text(non_resource.get("path")),
        )
    else:
        raise errors.Invalid.of(
            "SelfSubjectAccessReview.authorization.k8s.io",
            "",
            [
                errors.Cause(
                    "FieldValueInvalid",
                    "Invalid value: null: exactly one of nonResourceAttributes or "
                    "resourceAttributes must be specified",
                    "spec.resourceAttributes",
                )
            ],
        )
    decision, reason = request.app[keys.AUTHORIZER].authorize(attributes)
    status: dict[str, Any] = {"allowed": decision is authz.Decision.ALLOW}
    if decision is authz.Decision.DENY and reason:
        status["reason"] = reason
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    reply = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": AUTHORIZATION_V1,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
    return responses.json_response(reply, status=201)


async def self_subject_review(request: web.Request) -> web.Response:
    """The caller's own identity, as the server authenticated it (201)."""
    body = await _review_body(request, "SelfSubjectReview")
    user: authn.UserInfo = request[keys.USER]
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    reply = {
        "kind": "SelfSubjectReview",
        "apiVersion": AUTHENTICATION_V1,
        "metadata": metadata,
        "status": {"userInfo": info},
    }
    return responses.json_response(reply, status=201)


def add_routes(app: web.Application) -> None:
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
    r.add_get("/api/v1/namespaces/{name}", namespace)
    r.add_post(f"/apis/{AUTHORIZATION_V1}/selfsubjectaccessreviews", self_subject_access_review)
    r.add_post(f"/apis/{AUTHENTICATION_V1}/selfsubjectreviews", self_subject_review)


def documents_json(doc: Document) -> Any:
    """For tests and tools: the parsed body of a document."""
    return json.loads(doc.body)
