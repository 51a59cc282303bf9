"""The `scale` subresource over HTTP: decode a Scale (PUT) or a patch of one, answer a Scale.

What a Scale means for a WorkflowRun, and the write itself, are
`plnt.registry.workflowruns.scale`; this module only decodes, translates patch errors,
and encodes (KUBE-API.md §5.5: every answer is a Scale, never the WorkflowRun).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import keys, negotiation, params, patching, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry import patches
from plnt.registry.definitions import Object
from plnt.registry.store import ResourceStore
from plnt.registry.workflowruns import scale as scales


async def handle(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    name, namespace = info.name, info.namespace
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    if info.verb == "get":
        return responses.json_response(await scales.read(store, namespace, name))
    change: scales.ScaleChange
    if info.verb == "update":
        body, _ = await params.decode_object(request, limit=limit)

        def replace(current: Object) -> Any:
            del current  # a PUT names the whole Scale
            return body

        change = replace
    elif info.verb == "patch":
        media = negotiation.content_type(request.headers.get("Content-Type"))
        if media not in negotiation.PATCH_TYPES:
            raise patching.unsupported(negotiation.PATCH_TYPES)
        patch, _ = await params.decode_object(request, limit=limit)
        apply_patch = patching.applier(media, patch)

        def patched(current: Object) -> Object:
            try:
                return apply_patch(current)
            except patches.PatchError as error:
                raise patching.api_error(
                    error, qualified_kind="Scale.autoscaling", name=name
                ) from error

        change = patched
    else:
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    options = params.write_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    result = await scales.write(store, namespace, name, change, options)
    return responses.json_response(result.object, warnings=result.warnings)
