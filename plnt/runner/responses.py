"""JSON error bodies, the Server-Timing header, and the middleware that turns errors into both.

Every error the runner answers has one shape, OpenAI's (so its SDK raises the matching
exception): `{"error": {"message": ..., "type": ..., "param": ..., "code": ..., "step": ...,
"problems": [{"path", "message"}], "hop": ..., "backend": ..., "queue": ...}}` (`step`,
`problems`, a deadline's `hop` and a refusal's `backend` and `queue` only when they apply; `code` is
the HTTP status unless the error has an OpenAI code such as `model_not_found`). The message
alone is enough for a human.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from plnt.api.headers import CACHE_HEADER, FALLBACK_HEADER, RETRY_AFTER, CacheOutcome
from plnt.runner import errors, executing

log = logging.getLogger(__name__)


def error_body(error: errors.RunnerError) -> dict[str, Any]:
    """The JSON body for a runner error."""
    detail: dict[str, Any] = {
        "message": str(error),
        "type": error.type,
        "param": error.param,
        "code": error.code if error.code is not None else error.status,
    }
    if isinstance(error, errors.StepFailed):
        detail["step"] = error.step
    if isinstance(error, errors.DeadlineExceeded):
        detail["hop"] = error.hop
    if isinstance(error, errors.Overloaded):
        detail["backend"] = error.backend
        detail["queue"] = error.queue
    if isinstance(error, errors.InvalidInputs):
        detail["problems"] = [
            {"path": problem.path, "message": problem.message} for problem in error.problems
        ]
    return {"error": detail}


def error_response(
    error: errors.RunnerError, *, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response for a runner error, with its status (and `Retry-After` on a refusal
    for lack of room, so callers back off)."""
    if isinstance(error, errors.Overloaded):
        headers = {**(headers or {}), RETRY_AFTER: str(error.retry_after_seconds)}
    return web.json_response(error_body(error), status=error.status, headers=headers)


def http_error_response(error: web.HTTPException) -> web.Response:
    """A JSON response for an aiohttp HTTP error (404, 405, 413 ...)."""
    message = error.text if error.text and error.text != f"{error.status}: {error.reason}" else ""
    body = {
        "error": {
            "message": message or error.reason,
            "type": error.reason.lower().replace(" ", "_"),
            "param": None,
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


def headers_of(execution: executing.Execution) -> dict[str, str]:
    """The headers of a finished execution's whole answer: its Server-Timing and its cache
    outcome, so a proxy can report both without parsing the body."""
    headers = {
        "Server-Timing": timing_of(execution),
        CACHE_HEADER: CacheOutcome.of_counts(
            execution.cache_hits, execution.cache_misses, execution.cache_bypassed
        ),
    }
    if execution.fallback is not None:
        headers[FALLBACK_HEADER] = execution.fallback
    return headers


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
        return error_response(errors.RunnerError("internal error"))


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 413 when over the limit, 400 when not JSON."""
    raw = await request.read()  # raises HTTPRequestEntityTooLarge over client_max_size
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise errors.InvalidRequest(f"request body is not valid JSON: {error}") from error
