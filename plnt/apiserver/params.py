"""Query parameters and bodies of resource requests, read as kube-apiserver reads them.

Each verb's options are converted from the query first (`queryvalues`: a value that
does not convert is a 400 naming the parameter), then validated as a whole as kube's
`ValidateCreateOptions`, `ValidateUpdateOptions`, `ValidatePatchOptions`,
`ValidateDeleteOptions` and `ValidateListOptions` do: every error at once, a 422
`CreateOptions.meta.k8s.io "" is invalid: ...` (or `UpdateOptions`, `PatchOptions`,
`DeleteOptions`, `ListOptions`) with one cause per parameter. Handlers parse before
touching the registry, so a malformed parameter never acts.

Bodies are read up to the request limit (413 beyond it) and decoded by `bodies`
(off the event loop unless small JSON). Exceptions: `errors.APIError` subclasses only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from plnt.api import errors
from plnt.apiserver import bodies, negotiation, queryvalues
from plnt.registry import decoding, fieldselectors, selectors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.labelnames import go_json_type, go_quote
from plnt.registry.options import DeleteOptions, ListOptions, WriteOptions

FIELD_VALIDATION_VALUES = ("Ignore", "Warn", "Strict")
FIELD_MANAGER_MAX = 128
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
_DISCARD_LIMIT = 16 * 1024 * 1024


# --- kube's field errors on options -------------------------------------------------------


def _json_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _not_supported(field: str, shown: str, supported: Sequence[str]) -> errors.Cause:
    listed = ", ".join(go_quote(v) for v in supported)
    return errors.Cause(
        "FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {listed}", field
    )


def _forbidden(field: str, detail: str) -> errors.Cause:
    return errors.Cause("FieldValueForbidden", f"Forbidden: {detail}", field)


def _options_invalid(kind: str, causes: Sequence[errors.Cause]) -> errors.Invalid:
    return errors.Invalid.of(f"{kind}.meta.k8s.io", "", causes)


def _field_manager_causes(manager: str) -> list[errors.Cause]:
    """kube's ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[errors.Cause] = []
    if len(manager.encode()) > FIELD_MANAGER_MAX:
        causes.append(
            errors.Cause(
                "FieldValueTooLong",
                f"Too long: may not be more than {FIELD_MANAGER_MAX} bytes",
                "fieldManager",
            )
        )
    position = 0
    for char in manager:
        if not char.isprintable():
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(manager)}: invalid character "
                    f"U+{ord(char):04X} (at position {position})",
                    "fieldManager",
                )
            )
        position += len(char.encode())
    return causes


def _dry_run_causes(values: Sequence[str]) -> list[errors.Cause]:
    if all(value == "All" for value in values):
        return []
    return [_not_supported("dryRun", _json_value(list(values)), ["All"])]


def _field_validation_causes(value: str) -> list[errors.Cause]:
    if value in ("", *FIELD_VALIDATION_VALUES):
        return []
    return [_not_supported("fieldValidation", go_quote(value), ["", "Ignore", "Strict", "Warn"])]


# --- write options ---------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class _Written:
    """The query of a write, converted (400s already raised), not yet validated."""

    dry_run: tuple[str, ...]
    field_manager: str
    field_validation: str
    force: bool | None

    @classmethod
    def of(cls, query: MultiMapping[str]) -> _Written:
        queryvalues.pretty(query)
        return cls(
            dry_run=tuple(query.getall("dryRun", [])),
            field_manager=queryvalues.first(query, "fieldManager") or "",
            field_validation=queryvalues.first(query, "fieldValidation") or "",
            force=queryvalues.boolean(query, "force"),
        )

    def causes(self) -> list[errors.Cause]:
        return [
            *_field_manager_causes(self.field_manager),
            *_dry_run_causes(self.dry_run),
            *_field_validation_causes(self.field_validation),
        ]

    def options(
        self, *, user_agent: str, duplicates: Sequence[str], is_patch: bool, force: bool = False
    ) -> WriteOptions:
        return WriteOptions(
            dry_run=bool(self.dry_run),
            field_validation=self.field_validation or "Warn",
            field_manager=self.field_manager or manager_from_user_agent(user_agent),
            duplicates=tuple(duplicates),
            is_patch=is_patch,
            force=force,
        )


def create_options(
    query: MultiMapping[str], *, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """CreateOptions: dryRun, fieldManager (default: the User-Agent's product), fieldValidation.

    Without `fieldManager` the manager is the User-Agent up to its first `/`
    (`kubectl/v1.37.1 (linux/amd64) ...` → `kubectl`), as kube-apiserver derives it.
    `force` is not a create option and is ignored, as kube ignores it.
    """
    written = _Written.of(query)
    if causes := written.causes():
        raise _options_invalid("CreateOptions", causes)
    return written.options(user_agent=user_agent, duplicates=duplicates, is_patch=False)


def update_options(
    query: MultiMapping[str], *, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """UpdateOptions: the same parameters and rules as CreateOptions."""
    written = _Written.of(query)
    if causes := written.causes():
        raise _options_invalid("UpdateOptions", causes)
    return written.options(user_agent=user_agent, duplicates=duplicates, is_patch=False)


def patch_options(
    query: MultiMapping[str], *, media: str, user_agent: str = "", duplicates: Sequence[str] = ()
) -> WriteOptions:
    """PatchOptions: an apply patch needs `fieldManager`; `force` is for apply patches only."""
    written = _Written.of(query)
    causes: list[errors.Cause] = []
    if media == negotiation.APPLY_PATCH:
        if not written.field_manager:
            causes.append(
                errors.Cause(
                    "FieldValueRequired",
                    "Required value: is required for apply patch",
                    "fieldManager",
                )
            )
    elif written.force is not None:
        causes.append(_forbidden("force", "may not be specified for non-apply patch"))
    causes.extend(written.causes())
    if causes:
        raise _options_invalid("PatchOptions", causes)
    return written.options(
        user_agent=user_agent,
        duplicates=duplicates,
        is_patch=True,
        force=bool(written.force) and media == negotiation.APPLY_PATCH,
    )


def write_options(
    query: MultiMapping[str],
    *,
    duplicates: list[str] | None = None,
    is_patch: bool = False,
    user_agent: str = "",
) -> WriteOptions:
    """Options of a write that is an update, or a patch that is not an apply (subresources)."""
    if is_patch:
        return patch_options(
            query, media=negotiation.MERGE_PATCH, user_agent=user_agent, duplicates=duplicates or ()
        )
    return update_options(query, user_agent=user_agent, duplicates=duplicates or ())


def apply_options(query: MultiMapping[str], *, duplicates: list[str] | None = None) -> WriteOptions:
    """Options of an apply patch (422 PatchOptions without `fieldManager`)."""
    return patch_options(query, media=negotiation.APPLY_PATCH, duplicates=duplicates or ())


# --- reads -----------------------------------------------------------------------------------


def get_options(query: MultiMapping[str]) -> str:
    """GetOptions: the resourceVersion a read may be served at."""
    queryvalues.pretty(query)
    return queryvalues.resource_version(query)


def _selector_error(parameter: str, error: selectors.SelectorError) -> errors.BadRequest:
    text = str(error)
    return errors.BadRequest(text, causes=[errors.Cause("FieldValueInvalid", text, parameter)])


@dataclass(frozen=True, slots=True)
class Watching:
    """The watch-only parts of ListOptions."""

    timeout_seconds: int | None
    allow_bookmarks: bool
    send_initial_events: bool | None


def wants_watch(query: MultiMapping[str]) -> bool:
    """`watch` as kube reads it (strictly here): a bare `?watch` is true."""
    return bool(queryvalues.boolean(query, "watch"))


def list_options(
    query: MultiMapping[str], definition: ResourceDefinition, *, watch: bool
) -> ListOptions:
    """ListOptions converted in kube's order, then ValidateListOptions (all errors, 422)."""
    queryvalues.pretty(query)
    label_text = queryvalues.first(query, "labelSelector") or ""
    try:
        label = selectors.parse_label_selector(label_text)
    except selectors.SelectorError as error:
        raise _selector_error("labelSelector", error) from error
    try:
        field = fieldselectors.parse_field_selector(
            queryvalues.first(query, "fieldSelector") or "",
            allowed=definition.selectable_field_names(),
        )
    except selectors.SelectorError as error:
        raise _selector_error("fieldSelector", error) from error
    watch = wants_watch(query) or watch
    allow_bookmarks = bool(queryvalues.boolean(query, "allowWatchBookmarks"))
    rv = queryvalues.resource_version(query)
    match = queryvalues.first(query, "resourceVersionMatch") or ""
    timeout = queryvalues.integer(query, "timeoutSeconds")
    limit = queryvalues.integer(query, "limit") or 0
    continue_token = queryvalues.first(query, "continue") or ""
    send_initial = queryvalues.boolean(query, "sendInitialEvents")
    causes = (
        _watch_causes(match, continue_token, send_initial, allow_bookmarks)
        if watch
        else _list_causes(match, rv, continue_token, send_initial)
    )
    if causes:
        raise _options_invalid("ListOptions", causes)
    return ListOptions(
        label_selector=label,
        field_selector=field,
        limit=max(limit, 0),
        continue_token=continue_token or None,
        resource_version=rv,
        resource_version_match=match,
        timeout_seconds=timeout,
        allow_watch_bookmarks=allow_bookmarks,
        send_initial_events=send_initial,
    )


_MATCHES = ("Exact", "NotOlderThan")


def _list_causes(
    match: str, rv: str, continue_token: str, send_initial: bool | None
) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    if match:
        if not rv:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if continue_token:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in _MATCHES:
            causes.append(_not_supported("resourceVersionMatch", go_quote(match), [*_MATCHES, ""]))
        if match == "Exact" and rv == "0":
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial is not None:
        causes.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(
    match: str, continue_token: str, send_initial: bool | None, allow_bookmarks: bool
) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    if send_initial is not None and match != "NotOlderThan":
        causes.append(
            _forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if match:
        if send_initial is None:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match != "NotOlderThan":
            causes.append(_not_supported("resourceVersionMatch", go_quote(match), ["NotOlderThan"]))
        if continue_token:
            causes.append(
                _forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
    # plnt sends the initial-events-end bookmark only as a bookmark, so WatchList needs them.
    if send_initial and not allow_bookmarks:
        causes.append(
            _forbidden(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when sendInitialEvents is set",
            )
        )
    return causes


# --- bodies ----------------------------------------------------------------------------------


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


OBJECT_MEDIA_TYPES = ("", "application/json", "application/yaml", "*/*", "application/*")
"""What a create or update body may be labelled (`*/*` and `application/*`: JSON, a
documented difference from kube, which answers 415)."""


def unsupported_object_media() -> errors.UnsupportedMediaType:
    """kube's 415 for a create or update body that is not JSON or YAML (a patch type included)."""
    return errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml"
    )


def object_media(request: web.Request) -> str:
    """The media type of a create or update body; 415 for anything else, patch types too."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in OBJECT_MEDIA_TYPES:
        raise unsupported_object_media()
    return media


async def decode_data(data: bytes, *, media: str) -> tuple[Any, list[str]]:
    """Decode a body already read; 400 when empty or malformed."""
    if not data.strip():
        raise errors.BadRequest("the request body is empty; an object was expected")
    try:
        return await bodies.decode(data, content_type=media or "application/json")
    except decoding.DecodeError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error


async def decode_object(request: web.Request, *, limit: int) -> tuple[Any, list[str]]:
    """Read and decode a JSON or YAML body (no Content-Type means JSON); 400 if malformed."""
    data = await read_body(request, limit=limit)
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in (*OBJECT_MEDIA_TYPES, *negotiation.PATCH_TYPES, negotiation.APPLY_PATCH):
        raise unsupported_object_media()
    return await decode_data(data, media=media)


# --- delete ----------------------------------------------------------------------------------


async def delete_options(request: web.Request, *, limit: int) -> DeleteOptions:
    """DeleteOptions from the body when there is one, otherwise from the query (kube's rule).

    From the query: gracePeriodSeconds, orphanDependents, propagationPolicy, dryRun, and
    `uid`/`resourceVersion` as preconditions. Then ValidateDeleteOptions (422).
    """
    data = await read_body(request, limit=limit)
    body = _delete_body(data) if data.strip() else _delete_query(request.query)
    causes: list[errors.Cause] = []
    policy = body.get("propagationPolicy")
    if body.get("orphanDependents") is not None and policy is not None:
        causes.append(
            errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {_json_value(policy)}: orphanDependents and "
                "deletionPropagation cannot be both set",
                "propagationPolicy",
            )
        )
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(
            _not_supported("propagationPolicy", _json_value(policy), [*PROPAGATION_POLICIES, "nil"])
        )
    runs = body.get("dryRun") or []
    if not isinstance(runs, list):
        raise errors.BadRequest("DeleteOptions.dryRun must be a list of strings")
    causes.extend(_dry_run_causes(runs))
    if causes:
        raise _options_invalid("DeleteOptions", causes)
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.BadRequest("preconditions must be an object")
    return DeleteOptions(
        dry_run=bool(runs),
        precondition_uid=pre.get("uid"),
        precondition_resource_version=pre.get("resourceVersion"),
    )


def _delete_body(data: bytes) -> dict[str, Any]:
    """A DeleteOptions body (kind and apiVersion optional); typed fields are checked."""
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise errors.BadRequest(f"the DeleteOptions body is not valid JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise errors.BadRequest("DeleteOptions must be a JSON object")
    kind = parsed.get("kind")
    if kind not in (None, "", "DeleteOptions"):
        raise errors.BadRequest(f'expected kind DeleteOptions, got "{kind}"')
    grace = parsed.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise errors.BadRequest(
            "json: cannot unmarshal "
            f"{go_json_type(grace)} into Go struct field DeleteOptions.gracePeriodSeconds "
            "of type int64"
        )
    for name in ("orphanDependents",):
        value = parsed.get(name)
        if value is not None and not isinstance(value, bool):
            raise errors.BadRequest(
                f"json: cannot unmarshal {go_json_type(value)} into Go struct field "
                f"DeleteOptions.{name} of type bool"
            )
    policy = parsed.get("propagationPolicy")
    if policy is not None and not isinstance(policy, str):
        raise errors.BadRequest(
            f"json: cannot unmarshal {go_json_type(policy)} into Go struct field "
            "DeleteOptions.propagationPolicy of type v1.DeletionPropagation"
        )
    return parsed


def _delete_query(query: MultiMapping[str]) -> dict[str, Any]:
    """The query as a DeleteOptions body (conversion errors are 400s naming the parameter)."""
    queryvalues.pretty(query)
    body: dict[str, Any] = {}
    grace = queryvalues.integer(query, "gracePeriodSeconds")
    if grace is not None:
        body["gracePeriodSeconds"] = grace
    orphan = queryvalues.boolean(query, "orphanDependents")
    if orphan is not None:
        body["orphanDependents"] = orphan
    policy = queryvalues.first(query, "propagationPolicy")
    if policy is not None:
        body["propagationPolicy"] = policy
    runs = query.getall("dryRun", [])
    if runs:
        body["dryRun"] = list(runs)
    pre: dict[str, str] = {}
    if uid := queryvalues.first(query, "uid"):
        pre["uid"] = uid
    if rv := queryvalues.first(query, "resourceVersion"):
        pre["resourceVersion"] = rv
    if pre:
        body["preconditions"] = pre
    return body
