"""API errors in OpenAI's shape, for the `proxy` subresource.

A client of `…/workflowruns/NAME/proxy/v1` is an OpenAI client: its SDK raises by HTTP
status (401 `AuthenticationError`, 403 `PermissionDeniedError`, 404 `NotFoundError`, 429
`RateLimitError`, 5xx `InternalServerError`) and reads the message from
`{"error": {"message", "type", "param", "code"}}`. So on that path — and only there: the
subresource registers `error_response` as its error renderer (`routes`) — the error
middleware renders an API error in this shape instead of a metav1.Status, with the
same HTTP status and `Retry-After`. `type` is OpenAI's word for the status class; `code`
is the Status `reason` plnt would have answered (`Forbidden`, `NotFound`, `Unauthorized`,
`ServiceUnavailable`, …), so nothing a kube client could learn from the Status is lost. Errors
the runner answers (an unknown model is its 404 `model_not_found`) pass through unchanged:
the runner already speaks this shape.

No errors of its own.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import responses

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(error: errors.APIError) -> dict[str, Any]:
    """`{"error": {...}}` for an API error."""
    kind = _TYPES.get(error.code, "server_error" if error.code >= 500 else "invalid_request_error")
    return {"error": {"message": error.message, "type": kind, "param": None, "code": error.reason}}


def error_response(error: errors.APIError) -> web.Response:
    """The error with its status (and Retry-After when it has one), in OpenAI's shape."""
    headers = {}
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    return responses.json_response(error_body(error), status=error.code, headers=headers)
