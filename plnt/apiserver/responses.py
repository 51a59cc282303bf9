"""Response writers: every body is JSON with an accurate Content-Type.

aiohttp's default `application/octet-stream` would make client-go refuse to
decode (KUBE-API.md §0), so nothing in the server builds a Response by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiohttp import web

from plnt.api import codec, errors
from plnt.registry import fieldvalidation
from plnt.registry.options import AgentWarning

JSON_CONTENT_TYPE = "application/json"


def dumps(body: Any) -> bytes:
    return codec.dumps(body)


def json_response(
    body: Any,
    *,
    status: int = 200,
    content_type: str = JSON_CONTENT_TYPE,
    headers: dict[str, str] | None = None,
    warnings: Iterable[str | AgentWarning] = (),
) -> web.Response:
    return encoded_response(
        dumps(body), status=status, content_type=content_type, headers=headers, warnings=warnings
    )


def encoded_response(
    data: bytes,
    *,
    status: int = 200,
    content_type: str = JSON_CONTENT_TYPE,
    headers: dict[str, str] | None = None,
    warnings: Iterable[str | AgentWarning] = (),
) -> web.Response:
    """A response of JSON already encoded (a served object's cached bytes, written as is)."""
    response = web.Response(body=data, status=status, headers=headers)
    response.headers["Content-Type"] = content_type
    add_warnings(response, warnings)
    return response


def add_warnings(response: web.StreamResponse, warnings: Iterable[str | AgentWarning]) -> None:
    """One `Warning: 299 - "text"` header per warning, as kube's warning recorder writes;
    `299 <agent> "text"`, whole, for a warning that names its agent."""
    for warning in warnings:
        if isinstance(warning, AgentWarning):
            escaped = warning.text.replace("\\", "\\\\").replace('"', '\\"')
            response.headers.add("Warning", f'299 {warning.agent} "{escaped}"')
        else:
            response.headers.add("Warning", fieldvalidation.warning_header_value(warning))


def status_response(error: errors.APIError) -> web.Response:
    """A metav1.Status error; Retry-After whenever retryAfterSeconds is set."""
    headers = {}
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    return json_response(error.to_status(), status=error.code, headers=headers)


def success_status(*, name: str, group: str, kind: str, uid: str = "") -> dict[str, Any]:
    details = {"name": name, "group": group, "kind": kind}
    if uid:
        details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
