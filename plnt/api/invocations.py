"""The body `POST …/invoke` and a runner's `POST /invoke` take: one model for both sides.

The API server checks an invoke body and forwards it to a runner unchanged, so both parse
it with `InvokeRequest`: `{"inputs": ...}`, optionally named by `apiVersion` and `kind`
(a request file kept beside manifests for `kubectl create --raw -f`), which are accepted
and otherwise ignored; any other field is refused. `InvokeRequest.parse` raises
`InvalidInvokeRequest` (a `ValueError`) worded as both sides answer it (400). The headers
of the answer are in `headers`.

No I/O here.
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

ENVELOPE = 'the invoke body must be a JSON object {"inputs": {...}}'


class InvalidInvokeRequest(ValueError):
    """A body that is not the invoke envelope; the message says why."""


class InvokeRequest(BaseModel):
    """The body of an invocation: the workflow's inputs (their schema is the workflow's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inputs: Any = Field(
        description="The workflow's inputs, checked by the runner.",
        # Any value parses, so the runner words a refusal with the workflow's schema; what
        # the API documents (OpenAPI) is what that schema takes: an object.
        json_schema_extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )
    api_version: str | None = Field(
        default=None, alias="apiVersion", description="May name the body; not checked."
    )
    kind: str | None = Field(default=None, description="May name the body; not checked.")

    @classmethod
    def parse(cls, body: Any) -> InvokeRequest:
        """The envelope of a decoded body; `InvalidInvokeRequest` naming what is wrong."""
        try:
            return cls.model_validate(body)
        except pydantic.ValidationError as error:
            raise InvalidInvokeRequest(_explain(error)) from error


def _explain(error: pydantic.ValidationError) -> str:
    problems = error.errors()
    if any(p["type"] in ("model_type", "missing") for p in problems):
        return ENVELOPE  # not an object, or no inputs: the shape is what to fix
    extra = sorted(str(p["loc"][0]) for p in problems if p["type"] == "extra_forbidden")
    if extra:
        return f"{ENVELOPE}; unexpected fields: {', '.join(extra)}"
    return f"{ENVELOPE}; " + "; ".join(f"{p['loc'][0]}: {p['msg']}" for p in problems)
