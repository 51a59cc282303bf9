"""The `scale` subresource: autoscaling/v1 Scale over `spec.replicas` and `status.replicas`.

client-go decodes the answer with a scheme that knows only Scale, so every
response here is a Scale, never the WorkflowRun itself (KUBE-API.md §5.5).
"""

from __future__ import annotations

import copy
from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import keys, negotiation, params, patching, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry import patches
from plnt.registry.definitions import Object
from plnt.registry.store import ResourceStore


def to_scale(obj: Object) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    status = obj.get("status") or {}
    scale_status: dict[str, Any] = {"replicas": int(status.get("replicas") or 0)}
    if status.get("selector"):
        scale_status["selector"] = status["selector"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
        "status": scale_status,
    }


def _replicas_of(scale: Any, name: str) -> int:
    replicas = scale.get("spec", {}).get("replicas") if isinstance(scale, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.Invalid(
            f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
            f"{replicas!r}: must be greater than or equal to 0",
            name=name,
            group="autoscaling",
            kind="Scale",
            causes=[
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                    "spec.replicas",
                )
            ],
        )
    return replicas


async def handle(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    name, namespace = info.name, info.namespace
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    if info.verb == "get":
        return responses.json_response(to_scale(await store.get(namespace, name)))
    if info.verb == "update":
        body, _ = await params.decode_object(request, limit=limit)

        def replace(old: Object) -> Object:
            return _apply_scale(old, body, name)

        transform = replace
    elif info.verb == "patch":
        media = negotiation.content_type(request.headers.get("Content-Type"))
        if media not in negotiation.PATCH_TYPES:
            raise patching.unsupported(negotiation.PATCH_TYPES)
        patch, _ = await params.decode_object(request, limit=limit)
        apply_patch = patching.applier(media, patch)

        def patched(old: Object) -> Object:
            try:
                new_scale = apply_patch(to_scale(old))
            except patches.PatchError as error:
                raise patching.api_error(
                    error, qualified_kind="Scale.autoscaling", name=name
                ) from error
            return _apply_scale(old, new_scale, name)

        transform = patched
    else:
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    options = params.write_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    result = await store.update(namespace, name, transform, options, subresource="scale")
    return responses.json_response(to_scale(result.object), warnings=result.warnings)


def _apply_scale(old: Object, scale: Any, name: str) -> Object:
    """The object with spec.replicas from `scale`; a stale Scale resourceVersion is a 409."""
    replicas = _replicas_of(scale, name)
    new = copy.deepcopy(old)
    wanted = (scale.get("metadata") or {}).get("resourceVersion")
    if wanted:
        new["metadata"]["resourceVersion"] = wanted
    new.setdefault("spec", {})["replicas"] = replicas
    return new
