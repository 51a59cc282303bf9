"""JSON error bodies, the Server-Timing header, and the middleware that turns errors into both.

Every error the runner answers has one shape, compatible with OpenAI clients:
`{"error": {"type": ..., "message": ..., "step": ..., "problems": [{"path", "message"}]}}`
(`step` and `problems` only when they apply). The message alone is enough for a human.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from plnt.runner import errors, executing

log = logging.getLogger(__name__)


def error_body(error: errors.RunnerError) -> dict[str, Any]:
    """The JSON body for a runner error."""
    detail: dict[str, Any] = {"type": error.type, "message": str(error), "code": error.status}
    if isinstance(error, errors.StepFailed):
        detail["step"] = error.step
    if isinstance(error, errors.InvalidInputs):
        detail["problems"] = [
            {"path": problem.path, "message": problem.message} for problem in error.problems
        ]
    return {"error": detail}


def error_response(
    error: errors.RunnerError, *, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response for a runner error, with its status."""
    return web.json_response(error_body(error), status=error.status, headers=headers)


def http_error_response(error: web.HTTPException) -> web.Response:
    """A JSON response for an aiohttp HTTP error (404, 405, 413 ...)."""
    message = error.text if error.text and error.text != f"{error.status}: {error.reason}" else ""
    body = {
        "error": {
            "type": error.reason.lower().replace(" ", "_"),
            "message": message or error.reason,
            "code": error.status,
        }
    }
    headers = {k: v for k, v in error.headers.items() if k.lower() == "allow"}
    return web.json_response(body, status=error.status, headers=headers)


def server_timing(*, runner_ms: float, backend_ms: float | None) -> str:
    """`runner;dur=X, backend;dur=Y`: where the time of an invocation went."""
    parts = [f"runner;dur={runner_ms:.3f}"]
    if backend_ms is not None:
        parts.append(f"backend;dur={backend_ms:.3f}")
    return ", ".join(parts)


def timing_of(execution: executing.Execution) -> str:
    """The Server-Timing value of a finished execution."""
    return server_timing(runner_ms=execution.runner_ms, backend_ms=execution.backend_ms)


@web.middleware
async def errors_as_json(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost middleware: every error leaves as a JSON body with a clear message."""
    try:
        return await handler(request)
    except errors.RunnerError as error:
        return error_response(error)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        return http_error_response(error)
    except Exception:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        body = {"error": {"type": "internal_error", "message": "internal error", "code": 500}}
        return web.json_response(body, status=500)


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 413 when over the limit, 400 when not JSON."""
    raw = await request.read()  # raises HTTPRequestEntityTooLarge over client_max_size
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise errors.InvalidRequest(f"request body is not valid JSON: {error}") from error
