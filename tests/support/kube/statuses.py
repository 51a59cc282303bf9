"""metav1.Status bodies worded as kube-apiserver words them, and its 403 text.

The messages follow k8s.io/apimachinery `pkg/api/errors` (NewUnauthorized, NewForbidden,
NewNotFound, NewAlreadyExists, NewConflict, NewInvalid, NewBadRequest) and
k8s.io/apiserver `endpoints/handlers/responsewriters` (`forbiddenMessage`, the HTML
sanitizer, `reason` appended after a colon). Strings are quoted like Go's `%q`.

`StatusError` is the one exception the stand-in's handlers raise; the error middleware
turns it into the JSON body with the same HTTP status code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.kube import attributes as attributes_module

JSON = "application/json"


def go_quote(text: str) -> str:
    """Go's `%q` for the strings kube quotes (ASCII-safe names, paths, messages)."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Cause:
    """One metav1.StatusCause (`reason` is the cause type, as on the wire)."""

    reason: str
    message: str
    field: str = ""

    def body(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(slots=True)
class StatusError(Exception):
    """A failure answered with a metav1.Status of the same code."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.code, content_type=JSON)


def qualified(resource: str, group: str) -> str:
    """schema.GroupResource.String(): `resource.group`, or `resource` for the core group."""
    return f"{resource}.{group}" if group else resource


def unauthorized() -> StatusError:
    # The authentication filter answers every failure with the bare word.
    return StatusError(401, "Unauthorized", "Unauthorized")


def not_found(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        404,
        "NotFound",
        f"{qualified(resource, group)} {go_quote(name)} not found",
        _omit_empty({"name": name, "group": group, "kind": resource}),
    )


def already_exists(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        409,
        "AlreadyExists",
        f"{qualified(resource, group)} {go_quote(name)} already exists",
        _omit_empty({"name": name, "group": group, "kind": resource}),
    )


def conflict(resource: str, group: str, name: str) -> StatusError:
    return StatusError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {qualified(resource, group)} {go_quote(name)}: "
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
        _omit_empty({"name": name, "group": group, "kind": resource}),
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_allowed(action: str, resource: str, group: str) -> StatusError:
    return StatusError(
        405,
        "MethodNotAllowed",
        f"{action} is not supported on resources of kind {go_quote(qualified(resource, group))}",
        _omit_empty({"group": group, "kind": resource}),
    )


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> StatusError:
    return StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def invalid(kind: str, group: str, name: str, causes: Sequence[Cause]) -> StatusError:
    """NewInvalid: `Kind.group "name" is invalid: [field: message, ...]` with causes."""
    texts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    details: dict[str, Any] = _omit_empty({"name": name, "group": group, "kind": kind})
    details["causes"] = [c.body() for c in causes]
    return StatusError(
        422, "Invalid", f"{qualified_kind} {go_quote(name)} is invalid: {summary}", details
    )


def field_invalid(path: str, value: Any, detail: str) -> Cause:
    """field.Invalid: `Invalid value: <value>: <detail>` (strings quoted like Go)."""
    shown = go_quote(value) if isinstance(value, str) else json.dumps(value)
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", path)


def field_required(path: str, detail: str = "") -> Cause:
    return Cause("FieldValueRequired", "Required value" + (f": {detail}" if detail else ""), path)


# --- 403 ---------------------------------------------------------------------------------

_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def forbidden_detail(attrs: attributes_module.Attributes) -> str:
    """responsewriters.forbiddenMessage: the `User "u" cannot ...` sentence."""
    user, verb = go_quote(attrs.user.name), attrs.verb
    if not attrs.resource_request:
        return f"User {user} cannot {verb} path {go_quote(attrs.path)}"
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    group = go_quote(attrs.api_group)
    text = f"User {user} cannot {verb} resource {go_quote(resource)} in API group {group}"
    if attrs.namespace:
        return f"{text} in the namespace {go_quote(attrs.namespace)}"
    return f"{text} at the cluster scope"


def forbidden(attrs: attributes_module.Attributes, reason: str = "") -> StatusError:
    """responsewriters.Forbidden + apierrors.NewForbidden, character for character."""
    detail = forbidden_detail(attrs).translate(_SANITIZE)
    if reason:
        detail = f"{detail}: {reason}"
    group = attrs.api_group if attrs.resource_request else ""
    resource = attrs.resource if attrs.resource_request else ""
    name = attrs.name if attrs.resource_request else ""
    if not resource and not group:
        prefix = "forbidden"
    elif name:
        prefix = f"{qualified(resource, group)} {go_quote(name)} is forbidden"
    else:
        prefix = f"{qualified(resource, group)} is forbidden"
    return StatusError(
        403,
        "Forbidden",
        f"{prefix}: {detail}",
        _omit_empty({"name": name, "group": group, "kind": resource}),
    )


def _omit_empty(values: Mapping[str, str]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value}
