"""The stand-in's HTTP server: one aiohttp application and its filter chain, in kube's order.

errors → Status (outermost) → the request timeout (`timeouts`: requests that are not
long-running are cut at `State.request_timeout`, 504 or a killed connection) →
authentication (401) → request attributes → authorization (403, health paths always
allowed) → the handler: discovery, OpenAPI, reviews, the own
kinds of `kinds.VIEWS` and their subresources, or the aggregator's proxy for a
registered APIService. Unknown paths get kube's plain-text `404 page not found`. Writes
name their field manager by `?fieldManager=` or, as kube defaults it, the User-Agent.
Bodies are JSON, or protobuf for the kinds `protobuf` decodes (SelfSubjectAccessReview,
Secret, ConfigMap); answers are always JSON.
`State.closers` run when the app is cleaned up (the kubelet simulator's processes).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography import x509

from tests.support.kube import (
    aggregator,
    attributes,
    discovery,
    identity,
    kinds,
    openapi,
    policy,
    protobuf,
    resources,
    reviews,
    serverside_apply,
    statuses,
    store,
    subresources,
    timeouts,
)

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY = 3 * 1024 * 1024
VERSION = {
    "major": "1", "minor": "37", "gitVersion": "v1.37.0-standin", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2026-07-01T00:00:00Z", "goVersion": "go1.25",
    "compiler": "gc", "platform": "linux/amd64",
}  # fmt: skip


@dataclass
class State:
    """Everything a request may touch; owned by the stand-in's event loop."""

    store: store.Store
    resources: resources.Resources
    tokens: identity.Tokens
    policy: policy.Policy
    recorded: reviews.Recorded
    aggregator: aggregator.Aggregator
    client_ca: x509.Certificate
    server_address: str = ""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    request_timeout: float = timeouts.DEFAULT_REQUEST_TIMEOUT  # kube's --request-timeout


STATE = web.AppKey("state", State)
USER = web.RequestKey("user", attributes.User)
ATTRS = web.RequestKey("attributes", attributes.Attributes)


def _json(obj: Obj, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(obj).encode(), status=status, content_type=statuses.JSON, headers=headers
    )


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except statuses.StatusError as error:
        return error.response()


@web.middleware
async def authenticate_and_authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE]
    user = identity.authenticate(request, tokens=state.tokens, client_ca=state.client_ca)
    attrs = attributes.request_attributes(user, request.method, request.path, request.query)
    always = not attrs.resource_request and request.path in ("/healthz", "/livez", "/readyz")
    if not always:
        decision, reason = state.policy.decide(attrs)
        if decision != "allow":
            raise statuses.forbidden(attrs, reason)
    request[USER] = user
    request[ATTRS] = attrs
    return await handler(request)


async def _body(request: web.Request) -> Obj:
    media = request.headers.get("Content-Type", "application/json").split(";")[0].strip()
    if media not in ("application/json", ""):
        # The stand-in speaks JSON only; kube answers an undecodable type with 415.
        raise statuses.unsupported_media_type(media, ("application/json", "application/yaml"))
    raw = await request.read()
    try:
        body = json.loads(raw or b"{}")
    except ValueError as error:
        raise statuses.bad_request(
            f"couldn't get version/kind; json parse error: {error}"
        ) from error
    if not isinstance(body, dict):
        raise statuses.bad_request("the body of the request must be a JSON object")
    return body


async def _object(request: web.Request, view: kinds.View) -> Obj:
    """A create or update body: JSON, or protobuf for the kinds `protobuf` decodes (415 else)."""
    media = request.headers.get("Content-Type", "").split(";")[0].strip()
    if media != protobuf.MEDIA or not protobuf.decodes(view.api_version, view.kind):
        return await _body(request)
    try:
        return protobuf.decode_object(
            await request.read(), api_version=view.api_version, kind=view.kind
        )
    except ValueError as error:
        raise statuses.bad_request(f"couldn't decode the protobuf body: {error}") from error


async def dispatch(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    path = request.path.rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/version":
        return _json(VERSION)
    if parts[:1] == ["openapi"]:
        return await _openapi(request, state, parts)
    if parts[:1] == ["apis"] and len(parts) >= 3:
        service = state.aggregator.find(parts[1], parts[2])
        if service is not None:
            return await state.aggregator.proxy(request, service, request[USER])
    if path == "/api":
        if discovery.wants_v2(request.headers.get("Accept", "")):
            return _v2(request, [discovery.v2_group("")])
        return _json(discovery.api_versions(state.server_address))
    if path == "/apis":
        return await _apis(request, state)
    if parts[0] == "apis" and len(parts) == 2:
        return _api_group(state, parts[1])
    if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) == 3):
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        listed = discovery.resource_list(group, version)
        if listed is None:
            return _not_found()
        return _json(listed)
    if parts[0] in ("api", "apis"):
        return await _resource(request, state)
    return _not_found()


def _not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def _v2(request: web.Request, items: list[Obj]) -> web.Response:
    body = discovery.dumps(discovery.v2_list(items))
    tag = discovery.etag(body)
    headers = {"ETag": tag, "Vary": "Accept", "Cache-Control": "public"}
    if request.headers.get("If-None-Match") == tag:
        return web.Response(status=304, headers=headers)
    response = web.Response(body=body, headers=headers)
    response.headers["Content-Type"] = discovery.V2_MEDIA
    return response


async def _apis(request: web.Request, state: State) -> web.Response:
    own = {name: versions for name, versions in discovery.groups().items() if name}
    if discovery.wants_v2(request.headers.get("Accept", "")):
        items = [discovery.v2_group(name) for name in own]
        for name, services in state.aggregator.groups().items():
            versions: list[Obj] = []
            for service in services:
                fetched = await state.aggregator.discovery_v2(service)
                versions.extend(fetched["versions"])
            items.append(
                {"metadata": {"name": name, "creationTimestamp": None}, "versions": versions}
            )
        return _v2(request, items)
    groups = [discovery.api_group(name, versions) for name, versions in own.items()]
    for name, services in state.aggregator.groups().items():
        groups.append(discovery.api_group(name, [s.version for s in services]))
    for group in groups:
        group.pop("kind")
        group.pop("apiVersion")
    return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})


def _api_group(state: State, name: str) -> web.Response:
    services = state.aggregator.groups().get(name)
    if services:
        return _json(discovery.api_group(name, [s.version for s in services]))
    versions = discovery.groups().get(name)
    if not versions or not name:
        return _not_found()
    return _json(discovery.api_group(name, versions))


async def _openapi(request: web.Request, state: State, parts: list[str]) -> web.StreamResponse:
    if parts == ["openapi", "v3"]:
        paths = openapi.v3_root_paths()
        for service in state.aggregator.services.values():
            paths.update(await state.aggregator.openapi_v3_paths(service))
        return _json({"paths": paths})
    if parts[:2] == ["openapi", "v3"] and len(parts) >= 4:
        if parts[2] == "apis" and len(parts) == 5:
            service = state.aggregator.find(parts[3], parts[4])
            if service is not None:
                return await state.aggregator.proxy(request, service, request[USER])
        group, version = (
            ("", parts[3]) if parts[2] == "api" else (parts[3], parts[4] if len(parts) > 4 else "")
        )
        document = openapi.group_version_document(group, version)
        return _json(document) if document is not None else _not_found()
    if parts == ["openapi", "v2"]:
        accept = request.headers.get("Accept", "")
        if accept and "application/json" not in accept and "*/*" not in accept:
            return web.Response(status=406, text="406 Not Acceptable", content_type="text/plain")
        document = openapi.v2_document()
        for service in state.aggregator.services.values():
            theirs = await state.aggregator.openapi_v2(service)
            prefix = f"/apis/{service.group}/{service.version}/"
            document["paths"].update(
                {p: v for p, v in theirs.get("paths", {}).items() if p.startswith(prefix)}
            )
            document["definitions"].update(theirs.get("definitions", {}))
        return _json(document)
    return _not_found()


async def _resource(request: web.Request, state: State) -> web.StreamResponse:
    attrs: attributes.Attributes = request[ATTRS]
    user: attributes.User = request[USER]
    method = request.method
    if not attrs.resource_request:
        return _not_found()
    review = (attrs.api_group, attrs.resource)
    if method == "POST" and review == ("authentication.k8s.io", "tokenreviews"):
        return _json(
            reviews.token_review(
                await _body(request), tokens=state.tokens, recorded=state.recorded
            ),
            201,
        )
    if method == "POST" and review == ("authentication.k8s.io", "selfsubjectreviews"):
        return _json(reviews.self_subject_review(await _body(request), user), 201)
    if method == "POST" and review == ("authorization.k8s.io", "subjectaccessreviews"):
        answer = reviews.subject_access_review(
            await _body(request), rules=state.policy, recorded=state.recorded
        )
        return _json(answer, 201)
    if method == "POST" and review == ("authorization.k8s.io", "selfsubjectaccessreviews"):
        if request.headers.get("Content-Type", "").startswith(protobuf.MEDIA):
            body = protobuf.decode_self_subject_access_review(await request.read())
        else:
            body = await _body(request)
        answer = reviews.self_subject_access_review(
            body, user, rules=state.policy, recorded=state.recorded
        )
        return _json(answer, 201)
    view = kinds.find(attrs.api_group, attrs.api_version, attrs.resource)
    if view is None or (attrs.subresource and attrs.subresource not in view.subresources):
        return _not_found()
    namespace = attrs.namespace if view.namespaced else ""
    api = state.resources
    if attrs.verb not in view.verbs:
        raise statuses.method_not_allowed(attrs.verb, view.resource, view.group)
    content_type = request.headers.get("Content-Type", "")
    manager = serverside_apply.manager_from(
        request.query.get("fieldManager", ""), request.headers.get("User-Agent", "")
    )
    if content_type.startswith(serverside_apply.APPLY_MEDIA):
        manager = request.query.get("fieldManager", "")  # apply never defaults its manager
    force = request.query.get("force", "").lower() == "true"
    if attrs.subresource:
        return await _subresource(request, view, attrs, namespace, manager, force)
    if attrs.verb == "get":
        return _json(api.get(view, namespace, attrs.name))
    if attrs.verb == "list":
        listed = api.list(view, namespace, request.query, request.headers.get("Accept", ""))
        return _json(listed)
    if attrs.verb == "watch":
        return await api.watch(request, view, namespace)
    if attrs.verb == "create":
        created = api.create(view, namespace, await _object(request, view), manager=manager)
        return _json(created, 201)
    if attrs.verb == "update":
        obj = await _object(request, view)
        return _json(api.update(view, namespace, attrs.name, obj, manager=manager))
    if attrs.verb == "patch":
        body = await request.read()
        existed = api.store.get(view.storage, namespace, attrs.name) is not None
        patched = api.patch(
            view, namespace, attrs.name, content_type, body, manager=manager, force=force
        )
        return _json(patched, 200 if existed else 201)
    if attrs.verb == "delete":
        return _json(api.delete(view, namespace, attrs.name))
    raise statuses.method_not_allowed(attrs.verb, view.resource, view.group)


async def _subresource(
    request: web.Request,
    view: kinds.View,
    attrs: attributes.Attributes,
    namespace: str,
    manager: str,
    force: bool,
) -> web.StreamResponse:
    handlers = subresources.Subresources(request.app[STATE].resources)
    name, content_type = attrs.name, request.headers.get("Content-Type", "")
    if attrs.subresource == "scale":
        if attrs.verb == "get":
            return _json(handlers.get_scale(view, namespace, name))
        if attrs.verb == "update":
            scale = await _body(request)
            return _json(handlers.update_scale(view, namespace, name, scale, manager=manager))
        if attrs.verb == "patch":
            body = await request.read()
            return _json(
                handlers.patch_scale(view, namespace, name, content_type, body, manager=manager)
            )
    elif attrs.verb == "get":
        return _json(handlers.get_status(view, namespace, name))
    elif attrs.verb == "update":
        obj = await _body(request)
        return _json(handlers.update_status(view, namespace, name, obj, manager=manager))
    elif attrs.verb == "patch":
        body = await request.read()
        return _json(
            handlers.patch_status(
                view, namespace, name, content_type, body, manager=manager, force=force
            )
        )
    resource = f"{view.resource}/{attrs.subresource}"
    raise statuses.method_not_allowed(attrs.verb, resource, view.group)


def build_app(state: State) -> web.Application:
    request_timeout = timeouts.middleware(lambda request: request.app[STATE].request_timeout)
    app = web.Application(
        middlewares=[errors, request_timeout, authenticate_and_authorize],
        client_max_size=MAX_BODY,
    )
    app[STATE] = state
    app.on_response_prepare.append(timeouts.on_response_prepare)

    async def close_aggregator(_: web.Application) -> None:
        try:
            for close in reversed(state.closers):
                await close()
        finally:
            await state.aggregator.close()

    app.on_cleanup.append(close_aggregator)
    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app
