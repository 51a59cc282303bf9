"""Query parameters and bodies of resource requests, validated as kube-apiserver validates them.

Each parser raises an API error naming the offending parameter; handlers call
them before touching the registry, so bad input changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from plnt.api import errors
from plnt.apiserver import negotiation
from plnt.registry import decoding, fieldselectors, selectors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.options import DeleteOptions, ListOptions, WriteOptions

FIELD_VALIDATION_VALUES = ("Ignore", "Warn", "Strict")
_DISCARD_LIMIT = 16 * 1024 * 1024
_TRUE = ("true", "1")


def _invalid_param(field: str, message: str) -> errors.Invalid:
    return errors.Invalid(
        f"{field}: {message}",
        causes=[errors.Cause("FieldValueInvalid", message, field)],
    )


def flag(query: MultiMapping[str], name: str) -> bool:
    return query.get(name, "").lower() in _TRUE


def dry_run(query: MultiMapping[str]) -> bool:
    values = query.getall("dryRun", [])
    for value in values:
        if value != "All":
            raise errors.Invalid(
                f'dryRun: Unsupported value: "{value}": supported values: "All"',
                causes=[
                    errors.Cause(
                        "FieldValueNotSupported",
                        f'Unsupported value: "{value}": supported values: "All"',
                        "dryRun",
                    )
                ],
            )
    return bool(values)


def write_options(
    query: MultiMapping[str],
    *,
    duplicates: list[str] | None = None,
    is_patch: bool = False,
    user_agent: str = "",
) -> WriteOptions:
    """dryRun, fieldValidation (default Warn) and fieldManager (at most 128 characters).

    Without `fieldManager` the manager is the User-Agent up to its first `/`
    (`kubectl/v1.37.1 (linux/amd64) ...` → `kubectl`), as kube-apiserver derives it.
    """
    validation = query.get("fieldValidation", "") or "Warn"
    if validation not in FIELD_VALIDATION_VALUES:
        raise errors.BadRequest(
            f'fieldValidation: Invalid value: "{validation}": must be one of Ignore, Warn or Strict'
        )
    manager = query.get("fieldManager", "")
    if len(manager) > FIELD_MANAGER_MAX:
        raise _invalid_param("fieldManager", "Too long: may not be more than 128 bytes")
    return WriteOptions(
        dry_run=dry_run(query),
        field_validation=validation,
        field_manager=manager or manager_from_user_agent(user_agent),
        duplicates=tuple(duplicates or ()),
        is_patch=is_patch,
    )


# --- server-side apply options ---------------------------------------------------------------

FIELD_MANAGER_MAX = 128


def manager_from_user_agent(user_agent: str) -> str:
    """The printable characters before the first `/`, at most 128 bytes (kube's rule)."""
    out: list[str] = []
    size = 0
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable():
            continue
        size += len(char.encode())
        if size > FIELD_MANAGER_MAX:
            break
        out.append(char)
    return "".join(out)


def force(query: MultiMapping[str]) -> bool:
    """`force` as kube converts a bool query value: absent, `0`, `f`, `false` are false."""
    values = query.getall("force", [])
    if not values:
        return False
    return values[0] not in ("0",) and values[0].lower() not in ("f", "false")


def apply_options(query: MultiMapping[str], *, duplicates: list[str] | None = None) -> WriteOptions:
    """Options of an apply patch: `fieldManager` is required (422 PatchOptions otherwise)."""
    if not query.get("fieldManager", ""):
        cause = errors.Cause(
            "FieldValueRequired", "Required value: is required for apply patch", "fieldManager"
        )
        raise errors.Invalid.of("PatchOptions.meta.k8s.io", "", [cause])
    options = write_options(query, duplicates=duplicates, is_patch=True)
    return dataclasses.replace(options, force=force(query))


def list_options(
    query: MultiMapping[str], definition: ResourceDefinition, *, watch: bool
) -> ListOptions:
    """Selectors, paging and resourceVersion rules (ValidateListOptions)."""
    try:
        label = selectors.parse_label_selector(query.get("labelSelector", ""))
        field = fieldselectors.parse_field_selector(
            query.get("fieldSelector", ""), allowed=definition.selectable_field_names()
        )
    except selectors.SelectorError as error:
        raise errors.BadRequest(str(error)) from error
    limit_text = query.get("limit", "") or "0"
    try:
        limit = int(limit_text)
    except ValueError as error:
        raise errors.BadRequest(
            f'limit: Invalid value: "{limit_text}": must be an integer'
        ) from error
    limit = max(limit, 0)
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    send_initial = query.get("sendInitialEvents")
    if match and match not in ("NotOlderThan", "Exact"):
        raise _invalid_param(
            "resourceVersionMatch",
            f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"',
        )
    if watch:
        if match and (match != "NotOlderThan" or send_initial is None):
            raise _invalid_param(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden for watch unless "
                "sendInitialEvents is provided",
            )
        if send_initial is not None and flag(query, "sendInitialEvents"):
            if match != "NotOlderThan":
                raise _invalid_param(
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch "
                    "to NotOlderThan",
                )
            if not flag(query, "allowWatchBookmarks"):
                raise _invalid_param(
                    "allowWatchBookmarks",
                    "Forbidden: allowWatchBookmarks must be set to true when sendInitialEvents "
                    "is set",
                )
    else:
        if send_initial is not None:
            raise _invalid_param(
                "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"
            )
        if match and not rv:
            raise _invalid_param(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            )
        if match == "Exact" and rv == "0":
            raise _invalid_param(
                "resourceVersionMatch",
                'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            )
    return ListOptions(
        label_selector=label,
        field_selector=field,
        limit=limit,
        continue_token=query.get("continue") or None,
        resource_version=rv,
        resource_version_match=match,
    )


async def read_body(request: web.Request, *, limit: int) -> bytes:
    """The raw body, refused with a Status 413 beyond `limit` bytes."""
    too_large = errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")
    if request.content_length is not None and request.content_length > limit:
        await _discard(request)
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            await _discard(request)
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def _discard(request: web.Request, *, at_most: int = _DISCARD_LIMIT) -> None:
    """Read and drop what a refused body still carries, so the 413 reaches the client at once.

    Beyond `at_most` the connection is left to aiohttp, which closes it after lingering.
    """
    dropped = 0
    async for chunk in request.content.iter_chunked(256 * 1024):
        dropped += len(chunk)
        if dropped > at_most:
            return


async def decode_object(request: web.Request, *, limit: int) -> tuple[Any, list[str]]:
    """Decode a JSON or YAML body (no Content-Type means JSON); 400 on malformed input."""
    data = await read_body(request, limit=limit)
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in (
        "",
        "application/json",
        "application/yaml",
        "*/*",
        *negotiation.PATCH_TYPES,
        negotiation.APPLY_PATCH,
    ):
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml"
        )
    if not data.strip():
        raise errors.BadRequest("the request body is empty; an object was expected")
    try:
        return decoding.decode_body(data, content_type=media or "application/json")
    except decoding.DecodeError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error


async def delete_options(request: web.Request, *, limit: int) -> DeleteOptions:
    """DeleteOptions from the body (kind/apiVersion optional) or, with no body, the query."""
    query = request.query
    data = await read_body(request, limit=limit)
    body: dict[str, Any] = {}
    if data.strip():
        try:
            parsed = json.loads(data)
        except ValueError as error:
            raise errors.BadRequest(f"the DeleteOptions body is not valid JSON: {error}") from error
        if not isinstance(parsed, dict):
            raise errors.BadRequest("DeleteOptions must be a JSON object")
        body = parsed
        kind = body.get("kind")
        if kind not in (None, "", "DeleteOptions"):
            raise errors.BadRequest(f'expected kind DeleteOptions, got "{kind}"')
    runs = body.get("dryRun")
    if runs is None:
        dry = dry_run(query)
    else:
        if not isinstance(runs, list) or any(v != "All" for v in runs):
            raise _invalid_param("dryRun", 'Unsupported value: supported values: "All"')
        dry = bool(runs)
    policy = body.get("propagationPolicy", query.get("propagationPolicy"))
    if policy not in (None, "", "Orphan", "Background", "Foreground"):
        raise _invalid_param(
            "propagationPolicy",
            f'Unsupported value: "{policy}": supported values: "Foreground", "Background", '
            f'"Orphan"',
        )
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.BadRequest("preconditions must be an object")
    return DeleteOptions(
        dry_run=dry,
        precondition_uid=pre.get("uid"),
        precondition_resource_version=pre.get("resourceVersion"),
    )
