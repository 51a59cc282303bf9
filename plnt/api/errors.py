"""API errors: typed exceptions that carry their metav1.Status.

    APIError                      (code, reason)
    ├── BadRequest                400 BadRequest
    ├── Unauthorized              401 Unauthorized
    ├── Forbidden                 403 Forbidden
    ├── NotFound                  404 NotFound
    ├── MethodNotSupported        405 MethodNotAllowed
    ├── NotAcceptable             406 NotAcceptable
    ├── AlreadyExists             409 AlreadyExists
    ├── Conflict                  409 Conflict
    ├── Gone / Expired            410 Expired
    ├── RequestEntityTooLarge     413 RequestEntityTooLarge
    ├── UnsupportedMediaType      415 UnsupportedMediaType
    ├── Invalid                   422 Invalid (with field causes)
    ├── TooManyRequests           429 TooManyRequests (Retry-After)
    ├── InternalError             500 InternalError
    ├── ServiceUnavailable        503 ServiceUnavailable (Retry-After)
    └── Timeout                   504 Timeout

The registry raises these (translating storage errors once); the apiserver's
outermost middleware turns any of them into a Status response. Messages follow
k8s.io/apimachinery/pkg/api/errors so kubectl prints what users expect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GroupResource:
    """`workflowruns.plnt.work` in messages; `workflowruns` in details.kind."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass(frozen=True, slots=True)
class Cause:
    """One field error; serialised with the type under the key `reason`."""

    reason: str
    message: str
    field: str = ""

    def to_wire(self) -> dict[str, str]:
        body = {"reason": self.reason, "message": self.message}
        if self.field:
            body["field"] = self.field
        return body


class APIError(Exception):
    """Any error that becomes a metav1.Status response."""

    code = 500
    reason = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        name: str = "",
        group: str | None = None,
        kind: str = "",
        uid: str = "",
        causes: Sequence[Cause] = (),
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.uid = uid
        self.causes = tuple(causes)
        self.retry_after_seconds = retry_after_seconds

    def to_status(self) -> dict[str, Any]:
        """The metav1.Status body (status Failure, code equal to the HTTP status)."""
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group is not None:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.uid:
            details["uid"] = self.uid
        if self.causes:
            details["causes"] = [c.to_wire() for c in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            body["details"] = details
        return body


class BadRequest(APIError):
    code, reason = 400, "BadRequest"


class Unauthorized(APIError):
    code, reason = 401, "Unauthorized"


class Forbidden(APIError):
    code, reason = 403, "Forbidden"


class NotFound(APIError):
    code, reason = 404, "NotFound"

    @classmethod
    def of(cls, resource: GroupResource, name: str) -> NotFound:
        return cls(
            f'{resource} "{name}" not found',
            name=name,
            group=resource.group,
            kind=resource.resource,
        )


class MethodNotSupported(APIError):
    code, reason = 405, "MethodNotAllowed"

    @classmethod
    def of(cls, resource: GroupResource, action: str) -> MethodNotSupported:
        return cls(
            f'{action} is not supported on resources of kind "{resource}"',
            group=resource.group,
            kind=resource.resource,
        )


class NotAcceptable(APIError):
    code, reason = 406, "NotAcceptable"


class AlreadyExists(APIError):
    code, reason = 409, "AlreadyExists"

    @classmethod
    def of(cls, resource: GroupResource, name: str) -> AlreadyExists:
        return cls(
            f'{resource} "{name}" already exists',
            name=name,
            group=resource.group,
            kind=resource.resource,
        )


class Conflict(APIError):
    code, reason = 409, "Conflict"

    @classmethod
    def of(cls, resource: GroupResource, name: str, why: str) -> Conflict:
        return cls(
            f'Operation cannot be fulfilled on {resource} "{name}": {why}',
            name=name,
            group=resource.group,
            kind=resource.resource,
        )


OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class Expired(APIError):
    code, reason = 410, "Expired"


class RequestEntityTooLarge(APIError):
    code, reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(APIError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(APIError):
    code, reason = 422, "Invalid"

    @classmethod
    def of(cls, qualified_kind: str, name: str, causes: Sequence[Cause]) -> Invalid:
        """`WorkflowRun.plnt.work "x" is invalid: [a: ..., b: ...]` with every cause listed."""
        kind, _, group = qualified_kind.partition(".")
        parts = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
        summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        return cls(
            f'{qualified_kind} "{name}" is invalid: {summary}',
            name=name,
            group=group,
            kind=kind,
            causes=causes,
        )


class TooManyRequests(APIError):
    code, reason = 429, "TooManyRequests"


class InternalError(APIError):
    code, reason = 500, "InternalError"

    @classmethod
    def wrap(cls, error: BaseException) -> InternalError:
        text = str(error) or type(error).__name__
        return cls(
            f"Internal error occurred: {text}",
            causes=[Cause(reason="UnexpectedServerResponse", message=text)],
        )


class ServiceUnavailable(APIError):
    code, reason = 503, "ServiceUnavailable"


class Timeout(APIError):
    code, reason = 504, "Timeout"
