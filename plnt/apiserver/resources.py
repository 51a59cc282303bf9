"""Handlers of resource requests: decode, call the registry, encode.

One dispatcher reads the `RequestInfo` the middleware computed, finds the
resource's `ResourceStore`, and maps the verb (and subresource) to a registry
call. Representation (object, Table, PartialObjectMetadata) is decided by
`negotiation` and applied here, after the registry has answered.

A kind's own subresources (those that are not a part of the object, as `status` is) are
served by the handlers its package registered (`kinds`), looked up per request. Nothing
here decides what a write means: Events and deploy submissions come from the registry's
after-write step, which every write path reaches; its warnings come back in the write's
result and go out as `Warning` headers with the write's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import keys, negotiation, params, patching, responses, watch
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry import patches, tables, typemeta
from plnt.registry.definitions import Object
from plnt.registry.options import ListPage, Requester, Warnings, WriteOptions
from plnt.registry.store import ResourceStore


def find_store(request: web.Request, info: RequestInfo) -> ResourceStore:
    stores = request.app[keys.STORES]
    store = stores.get((info.api_group, info.resource))
    if store is None or store.definition.version != info.api_version:
        raise errors.NotFound("the server could not find the requested resource")
    if store.definition.namespaced and not info.namespace and info.verb not in ("list", "watch"):
        raise errors.NotFound("the server could not find the requested resource")
    return store


def with_requester(request: web.Request, options: WriteOptions) -> WriteOptions:
    """`options` naming the authenticated user, for admission hooks that ask about them."""
    user = request[keys.USER]
    requester = Requester(name=user.name, uid=user.uid, groups=user.groups, extra=user.extra)
    return dataclasses.replace(options, requester=requester)


def encode_one(request: web.Request, store: ResourceStore, obj: Object) -> Any:
    rep = negotiation.choose(request.headers.get("Accept"))
    if rep.kind == "Table":
        include = tables.check_include_object(request.query.get("includeObject"))
        body = tables.table(
            store.definition,
            [obj],
            include_object=include,
            resource_version=obj.get("metadata", {}).get("resourceVersion", ""),
        )
        body["apiVersion"] = f"meta.k8s.io/{rep.version}"
        return body
    if rep.kind.startswith("PartialObjectMetadata"):
        return tables.partial_object_metadata(obj)
    return obj


def answer_one(request: web.Request, store: ResourceStore, obj: Object) -> bytes:
    """The body of a GET: a plain object's bytes are the store's, encoded once per
    resourceVersion; a Table or PartialObjectMetadata is built (and encoded) per request."""
    if negotiation.choose(request.headers.get("Accept")).kind == "Object":
        return store.encoded(obj)
    return responses.dumps(encode_one(request, store, obj))


def _list_meta(page: ListPage) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": page.resource_version}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    return meta


def answer_list(request: web.Request, store: ResourceStore, page: ListPage) -> bytes:
    """The body of a LIST: a plain list splices its items' bytes (the same a GET answers)
    into the compact `{"kind","apiVersion","metadata","items"}` that encoding the whole
    list writes; other representations are built per request (`encode_list`)."""
    if negotiation.choose(request.headers.get("Accept")).kind != "Object":
        return responses.dumps(encode_list(request, store, page))
    d = store.definition
    head = responses.dumps(
        {"kind": f"{d.kind}List", "apiVersion": d.api_version, "metadata": _list_meta(page)}
    )
    items = b",".join([store.encoded(obj) for obj in page.items])
    return b"".join((head[:-1], b',"items":[', items, b"]}"))


def encode_list(request: web.Request, store: ResourceStore, page: ListPage) -> Any:
    d = store.definition
    rep = negotiation.choose(request.headers.get("Accept"))
    if rep.kind == "Table":
        include = tables.check_include_object(request.query.get("includeObject"))
        body = tables.table(
            d,
            page.items,
            include_object=include,
            resource_version=page.resource_version,
            continue_token=page.continue_token,
            remaining=page.remaining,
        )
        body["apiVersion"] = f"meta.k8s.io/{rep.version}"
        return body
    meta = _list_meta(page)
    if rep.kind.startswith("PartialObjectMetadata"):
        return {
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "items": [tables.partial_object_metadata(o) for o in page.items],
        }
    return {
        "kind": f"{d.kind}List",
        "apiVersion": d.api_version,
        "metadata": meta,
        "items": page.items,
    }


async def _server_side_apply(
    request: web.Request, store: ResourceStore, info: RequestInfo, *, limit: int
) -> web.StreamResponse:
    """`kubectl apply --server-side`: options first (422), then the configuration."""
    data = await params.read_body(request, limit=limit)
    options = params.patch_options(
        request.query,
        media=negotiation.APPLY_PATCH,
        user_agent=request.headers.get("User-Agent", ""),
    )
    config, duplicates = await params.decode_data(data, media=negotiation.APPLY_PATCH)
    options = with_requester(request, dataclasses.replace(options, duplicates=tuple(duplicates)))
    result = await store.apply(
        info.namespace, info.name, config, options, subresource=info.subresource
    )
    status = 201 if result.created else 200
    return responses.json_response(result.object, status=status, warnings=result.warnings)


async def _get(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    # "0": any cached state will do (kube's cheap read); anything else: the latest.
    resource_version = params.get_options(request.query)
    obj = await store.get(info.namespace, info.name, resource_version=resource_version)
    return responses.encoded_response(answer_one(request, store, obj))


async def _list(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    if params.wants_watch(request.query):  # `?watch` with no value is a watch, as in kube
        return await _watch(request, store, info)
    options = params.list_options(request.query, store.definition, watch=False)
    page = await store.list(info.namespace, options)
    return responses.encoded_response(answer_list(request, store, page))


async def _watch(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    options = params.list_options(request.query, store.definition, watch=True)
    return await watch.serve(request, store, info.namespace, options)


async def _object(
    request: web.Request, store: ResourceStore, data: bytes, media: str, options: WriteOptions
) -> tuple[Object, WriteOptions]:
    """Decode a create or update body; it must say its kind (kube's 400 otherwise)."""
    body, duplicates = await params.decode_data(data, media=media)
    typemeta.check_type_meta(
        store.definition,
        body,
        data=data,
        media=media,
        field_validation=options.field_validation,
    )
    return body, dataclasses.replace(options, duplicates=tuple(duplicates))


async def _create(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    """kube's order: Content-Type (415), body size (413), options (400/422), the body (400)."""
    if info.subresource:
        raise errors.MethodNotSupported.of(store.definition.group_resource, "create")
    media = params.object_media(request)
    data = await params.read_body(request, limit=request.app[keys.SETTINGS].max_request_body_bytes)
    options = params.create_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    body, options = await _object(request, store, data, media, options)
    result = await store.create(info.namespace, body, with_requester(request, options))
    return responses.json_response(result.object, status=201, warnings=result.warnings)


async def _update(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    """kube's order: body size (413), options (400/422), Content-Type (415), the body (400)."""
    data = await params.read_body(request, limit=request.app[keys.SETTINGS].max_request_body_bytes)
    options = params.update_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    media = params.object_media(request)
    body, options = await _object(request, store, data, media, options)
    result = await store.update(
        info.namespace, info.name, lambda old: body, options, subresource=info.subresource
    )
    return responses.json_response(result.object, warnings=result.warnings)


async def _patch(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    """kube's order: patch type (415), body size (413), options (400/422), the patch (400)."""
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media == negotiation.APPLY_PATCH:
        return await _server_side_apply(request, store, info, limit=limit)
    if media not in negotiation.PATCH_TYPES:
        raise patching.unsupported()
    data = await params.read_body(request, limit=limit)
    options = params.patch_options(
        request.query, media=media, user_agent=request.headers.get("User-Agent", "")
    )
    patch_body, _ = await params.decode_data(data, media=media)
    transform = patching.applier(media, patch_body)
    kind, name = store.definition.qualified_kind, info.name

    def apply(old: Object) -> Object:
        try:
            return transform(old)
        except patches.PatchError as error:
            raise patching.api_error(error, qualified_kind=kind, name=name) from error

    result = await store.update(info.namespace, name, apply, options, subresource=info.subresource)
    return responses.json_response(result.object, warnings=result.warnings)


async def _delete(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    options = await params.delete_options(request, limit=limit)
    warnings: Warnings = []
    obj, _ = await store.delete(info.namespace, info.name, options, warnings=warnings)
    return responses.json_response(obj, warnings=warnings)


async def _delete_collection(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    list_options = params.list_options(request.query, store.definition, watch=False)
    options = await params.delete_options(request, limit=limit)
    warnings: Warnings = []
    page = await store.delete_collection(info.namespace, list_options, options, warnings=warnings)
    return responses.json_response(encode_list(request, store, page), warnings=warnings)


_Handler = Callable[[web.Request, ResourceStore, RequestInfo], Awaitable[web.StreamResponse]]
_VERBS: dict[str, _Handler] = {
    "get": _get,
    "list": _list,
    "watch": _watch,
    "create": _create,
    "update": _update,
    "patch": _patch,
    "delete": _delete,
    "deletecollection": _delete_collection,
}


async def dispatch(request: web.Request) -> web.StreamResponse:
    """Serve any resource request: find the resource, then the verb's (or subresource's)
    handler."""
    info: RequestInfo = request[keys.REQUEST_INFO]
    store = find_store(request, info)
    d = store.definition
    if info.subresource:
        if d.subresource(info.subresource) is None:
            raise errors.NotFound("the server could not find the requested resource")
        special = request.app[keys.SUBRESOURCES].find(info)
        if special is not None:
            return await special.handler(request, store, info)
        if info.verb not in ("get", "update", "patch"):
            raise errors.MethodNotSupported.of(d.group_resource, info.verb)
    handler = _VERBS.get(info.verb)
    if handler is None or (not info.subresource and info.verb not in d.verbs):
        # A verb the kind does not declare (discovery does not list it): kube's 405.
        raise errors.MethodNotSupported.of(d.group_resource, info.verb)
    return await handler(request, store, info)
