"""What can go wrong when talking to plnt's API, as one exception tree.

    ClientError                    anything this package raises
    ├── KubeconfigError            the kubeconfig cannot be used (names the file and the piece)
    ├── TransportError             no HTTP answer: connection refused, TLS failure, timeout
    └── ApiError                   the server answered with a failure (a metav1.Status)
        ├── BadRequest             400
        ├── Unauthorized           401
        ├── Forbidden              403
        ├── NotFound               404
        ├── Conflict               409 (optimistic-lock conflicts)
        │   └── AlreadyExists      409 with reason AlreadyExists
        ├── Gone                   410 (a watch's resourceVersion was compacted)
        ├── Invalid                422 (with field causes)
        └── ServerError            5xx

Callers (the CLI, saga activities) branch on the class; the message is the
server's own Status message, so it can be shown to a human unchanged. HTTP
failures are translated once, in `from_response`; aiohttp errors become
`TransportError` with the cause chained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ClientError(Exception):
    """Any failure of the plnt client."""


class KubeconfigError(ClientError):
    """The kubeconfig is missing, malformed, or lacks what a connection needs."""


class TransportError(ClientError):
    """The request got no HTTP answer (connection, TLS or timeout failure)."""


@dataclass(frozen=True, slots=True)
class Cause:
    """One field error of a Status (`details.causes[]`)."""

    reason: str
    message: str
    field: str = ""


class ApiError(ClientError):
    """The server answered with a failure; `status` is the Status body as received."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str = "",
        causes: tuple[Cause, ...] = (),
        status: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.causes = causes
        self.status: Mapping[str, Any] = status or {}


class BadRequest(ApiError):
    """400: the request itself is malformed."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: the user may not do this."""


class NotFound(ApiError):
    """404: no such object (or no such subresource on this server)."""


class Conflict(ApiError):
    """409: the object changed meanwhile, or the operation conflicts with its state."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old (compacted)."""


class Invalid(ApiError):
    """422: the object failed validation; `causes` name every field."""


class ServerError(ApiError):
    """5xx: the server failed; retrying may help."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def from_status(status: Mapping[str, Any], *, http_code: int) -> ApiError:
    """The typed error for a metav1.Status body (the Status's own code wins when present)."""
    code = status.get("code")
    if not isinstance(code, int) or code < 400:
        code = http_code
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "") or f"the server answered {code} {reason}".strip()
    details = status.get("details")
    raw_causes = details.get("causes") if isinstance(details, Mapping) else None
    causes = tuple(
        Cause(
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
            field=str(c.get("field") or ""),
        )
        for c in (raw_causes if isinstance(raw_causes, list) else [])
        if isinstance(c, Mapping)
    )
    kind: type[ApiError]
    if code == 409 and reason == "AlreadyExists":
        kind = AlreadyExists
    elif code >= 500:
        kind = ServerError
    else:
        kind = _BY_CODE.get(code, ApiError)
    return kind(message, code=code, reason=reason, causes=causes, status=status)


def from_response(http_code: int, body: Any, text: str) -> ApiError:
    """The typed error for a failed response: its Status if it sent one, else its text.

    A Status may come without `kind`: kube-apiserver's request-timeout filter encodes
    the bare struct (`{"metadata":{},"status":"Failure","message":"Timeout: …"}`), so
    `status: Failure` with a message counts as one too. An error in the runner's or
    OpenAI's shape (`{"error": {"message", "code"?}}`, what the run's `proxy` path
    answers) gives its message, and its string `code` as the reason.
    """
    if isinstance(body, Mapping) and (
        body.get("kind") == "Status"
        or (body.get("status") == "Failure" and isinstance(body.get("message"), str))
    ):
        return from_status(body, http_code=http_code)
    runner = _runner_message(body)
    message = runner or text.strip()[:500] or f"the server answered HTTP {http_code}"
    status = {"message": message, **_runner_causes(body)}
    reason = _error_code(body)
    if reason:
        status["reason"] = reason
    return from_status(status, http_code=http_code)


def _error_code(body: Any) -> str:
    """The `error.code` of an OpenAI-shaped error when it is a word (plnt's proxy path puts
    the Status reason there: `NotFound`, `Forbidden` …), else ""."""
    error = body.get("error") if isinstance(body, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) else ""


def _runner_causes(body: Any) -> dict[str, Any]:
    """A runner's input problems as Status causes (`field` is the problem's JSON path)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    problems = error.get("problems") if isinstance(error, Mapping) else None
    if not isinstance(problems, list):
        return {}
    causes = [
        {"reason": "FieldValueInvalid", "message": str(p.get("message") or ""), "field": p["path"]}
        for p in problems
        if isinstance(p, Mapping) and isinstance(p.get("path"), str)
    ]
    return {"details": {"causes": causes}} if causes else {}


def _runner_message(body: Any) -> str | None:
    """A runner's own error body (`{"error": {"type", "message", "problems"?}}`) as one line.

    Invocations are answered by the runner, not the API server, so their failures carry
    the runner's error shape rather than a metav1.Status.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping) or not isinstance(error.get("message"), str):
        return None
    message = str(error["message"])
    problems = error.get("problems")
    if isinstance(problems, list) and problems:
        details = [
            f"{p.get('path') or '(inputs)'}: {p.get('message')}"
            for p in problems
            if isinstance(p, Mapping)
        ]
        if details and not all(d in message for d in details):
            message = f"{message} ({'; '.join(details)})"
    return message
