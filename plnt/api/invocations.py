"""The body `POST …/invoke` and a runner's `POST /invoke` take: one model for both sides.

The API server checks an invoke body and forwards it to a runner unchanged, so both parse
it with `InvokeRequest`: `{"inputs": ...}`, optionally named by `apiVersion` and `kind`
(a request file kept beside manifests for `kubectl create --raw -f`), which are accepted
and otherwise ignored; any other field is refused. `InvokeRequest.parse` raises
`InvalidInvokeRequest` (a `ValueError`) worded as both sides answer it (400). The headers
of the answer are in `headers`.

Two options of the envelope serve durable invocations, which resume a call on another
runner replica without running again the steps that had finished (docs/runner.md):
`stepOutputs: true` makes each `step` line of a stream carry that step's `output`, and
`completedSteps: {ID: {"output": ...}}` hands those outputs back, so the runner seeds its
DAG with them and runs only the rest.

No I/O here.
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

ENVELOPE = 'the invoke body must be a JSON object {"inputs": {...}}'


class InvalidInvokeRequest(ValueError):
    """A body that is not the invoke envelope; the message says why."""


class CompletedStep(BaseModel):
    """A step that finished in an earlier attempt of the same invocation: its output."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output: Any = Field(description="The step's output, as its `step` line carried it.")


class InvokeRequest(BaseModel):
    """The body of an invocation: the workflow's inputs (their schema is the workflow's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inputs: Any = Field(description="The workflow's inputs, checked by the runner.")
    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: str | None = None
    completed_steps: dict[str, CompletedStep] | None = Field(
        default=None,
        alias="completedSteps",
        description=(
            "Outputs of steps an earlier attempt finished, by step id: they are not run again."
        ),
    )
    step_outputs: bool = Field(
        default=False,
        alias="stepOutputs",
        description="A stream's step lines carry each finished step's output.",
    )

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

