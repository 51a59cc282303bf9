"""`POST /api/v1/namespaces` on a standalone server: protobuf from kubectl, JSON or YAML
from anyone else.

kubectl's typed client sends a Namespace as protobuf and does not fall back to JSON on a
415, so this route sits before the generic resource routes: a protobuf body is decoded
here (`protobuf`) and created in the Namespace store, any other body goes to the generic
handler (`resources.dispatch`).
"""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver import keys, negotiation, params, protowire, resources, responses
from plnt.apiserver.namespaces import protobuf
from plnt.registry import namespaces


async def create(request: web.Request) -> web.StreamResponse:
    """POST /api/v1/namespaces: kubectl's typed client sends protobuf, everyone else JSON
    or YAML (the generic handler)."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media != protowire.PROTOBUF:
        return await resources.dispatch(request)
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    body = protobuf.decode_namespace(await params.read_body(request, limit=limit))
    options = params.write_options(
        request.query, duplicates=[], user_agent=request.headers.get("User-Agent", "")
    )
    store = request.app[keys.STORES][(namespaces.DEFINITION.group, namespaces.DEFINITION.plural)]
    result = await store.create("", body, options)
    return responses.json_response(result.object, status=201, warnings=result.warnings)
