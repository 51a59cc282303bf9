"""Invocations on the wire: the invoke envelope both sides parse, and the Invocation kind.

The API server checks an invoke body and forwards it to a runner unchanged, so both parse
it with `InvokeRequest`: `{"inputs": ...}`, optionally named by `apiVersion` and `kind`
(a request file kept beside manifests for `kubectl create --raw -f`), which are accepted
and otherwise ignored; any other field is refused. `InvokeRequest.parse` raises
`InvalidInvokeRequest` (a `ValueError`) worded as both sides answer it (400). The headers
of the answer are in `headers`.

Two options of the envelope serve durable invocations, which resume a call on another
runner replica without running again the steps that had finished (docs/invocations.md):
`stepOutputs: true` makes each `step` line of a stream carry that step's `output`, and
`completedSteps: {ID: {"output": ..., "skipped": ...}}` hands those outputs back, so the
runner seeds its DAG with them and runs only the rest; `stepProgress` hands back what
unfinished steps had done inside them (`plnt.api.checkpoints`).

`Invocation` (plnt.work/v1) is one such call kept as an object: its spec (immutable) says
which WorkflowRun, inputs, revision and bounds; its status what happened.

No I/O here.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from plnt.api import names
from plnt.api.base import WireModel
from plnt.api.meta import Condition, ObjectMeta

ENVELOPE = 'the invoke body must be a JSON object {"inputs": {...}}'


class InvalidInvokeRequest(ValueError):
    """A body that is not the invoke envelope; the message says why."""


class CompletedStep(BaseModel):
    """A step that finished in an earlier attempt of the same invocation: its output."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output: Any = Field(description="The step's output, as its `step` line carried it.")
    skipped: str | None = Field(
        default=None,
        description="Why the step did not run (its `when` was false), as its trace said: "
        "it stays skipped for its dependants (`steps.ID.skipped`).",
    )


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
        description="A stream's step lines carry each finished step's output, and "
        "`progress` lines what a step finished inside (plnt.api.checkpoints).",
    )
    step_progress: dict[str, dict[str, Any]] | None = Field(
        default=None,
        alias="stepProgress",
        description=(
            "What steps an earlier attempt began had finished inside, by step id: forEach "
            "elements and tool-loop turns and calls (plnt.api.checkpoints); not done again."
        ),
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


# --- the Invocation kind ---------------------------------------------------------------

KIND = names.INVOCATION_KIND
PLURAL = names.INVOCATIONS
API_VERSION = names.API_VERSION
WORKFLOW_ID_PREFIX = "invocation"

DEFAULT_TIMEOUT_SECONDS = 600
MAX_TIMEOUT_SECONDS = 86_400
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 3600
"""Finished Invocations are deleted an hour after they finished unless they say otherwise."""
MAX_TTL_SECONDS_AFTER_FINISHED = 30 * 86_400
MAX_INPUT_BYTES = 256 * 1024
"""`spec.inputs` as compact JSON: it is stored in etcd and travels in Temporal's history."""
MAX_OUTPUT_BYTES = 256 * 1024
"""The largest `status.output` (compact JSON) an Invocation keeps; a larger one fails the
Invocation with reason `OutputTooLarge` (docs/invocations.md says why it is not kept
elsewhere)."""

REVISION_WORDS = ("stable", "canary")

InvocationPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Cancelled"]
FINISHED_PHASES: tuple[str, ...] = names.INVOCATION_FINISHED_PHASES

COMPLETE = "Complete"
FAILED = "Failed"
RECONCILING = "Reconciling"
STALLED = "Stalled"

RevisionSelector = Annotated[
    int | str,
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "description": (
                '"stable" (the promoted revision, the default), "canary" (the other revision'
                " taking traffic), or a revision number that serves."
            ),
        }
    ),
]


class InvocationSpec(WireModel):
    """What to run: which WorkflowRun, with which inputs, on which revision, for how long.

    Immutable after create, as a Job's template is: an Invocation records one call.
    """

    workflow_run: str = Field(
        min_length=1, description="The WorkflowRun (in this namespace) whose workflow runs."
    )
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description=f"The workflow's inputs (at most {MAX_INPUT_BYTES} bytes as JSON).",
    )
    revision: RevisionSelector = "stable"
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description=(
            "Longest the invocation may take, retries on other replicas included; then it"
            " fails with reason Timeout."
        ),
    )
    ttl_seconds_after_finished: int = Field(
        default=DEFAULT_TTL_SECONDS_AFTER_FINISHED,
        ge=0,
        le=MAX_TTL_SECONDS_AFTER_FINISHED,
        description=(
            "Seconds a finished Invocation is kept before it is deleted"
            f" (default {DEFAULT_TTL_SECONDS_AFTER_FINISHED}; 0: at once)."
        ),
    )


class InvocationUsage(WireModel):
    """Tokens the invocation's model calls used, as the runner's answer summed them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    source: Literal["reported", "counted"] | None = Field(
        default=None,
        description=(
            "`reported`: the backend's own numbers; `counted`: the runner counted at least"
            " part of them (a backend that streams without usage), as `plnt.api.usage` says."
        ),
    )


class InvocationError(WireModel):
    """Why an Invocation failed: a CamelCase reason and what a human should know."""

    reason: str
    message: str = ""
    step: str | None = Field(default=None, description="The workflow step that failed, if any.")


class InvocationStatus(WireModel):
    """What happened to the call; written by the invocation's workflow through the API."""

    phase: InvocationPhase | None = Field(default=None, description="Coarse lifecycle phase.")
    observed_generation: int | None = Field(
        default=None, description="Set when the invocation finished (kstatus reads it)."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description=(
            "Complete or Failed once finished (kubectl wait --for=condition=Complete);"
            " Reconciling while it runs and Stalled when it failed (kstatus)."
        ),
    )
    revision: int | None = Field(default=None, description="The revision that serves the call.")
    digest: str | None = Field(default=None, description="Digest of that revision's spec.")
    endpoint: str | None = Field(default=None, description="The runner replica last called.")
    start_time: str | None = Field(default=None, description="When the call started.")
    completion_time: str | None = Field(default=None, description="When it finished.")
    output: Any = Field(default=None, description="The workflow's output.")
    usage: InvocationUsage | None = Field(default=None, description="Tokens the backend counted.")
    trace: list[dict[str, Any]] | None = Field(
        default=None, description="One entry per step, as the runner traced it."
    )
    attempts: int | None = Field(
        default=None,
        description=(
            "Calls sent to runners, every replica and retry together (more than 1 after a"
            " lost replica or worker); each is counted before it is sent."
        ),
    )
    error: InvocationError | None = Field(default=None, description="Why it failed.")
    message: str | None = Field(default=None, description="What is happening now.")


class Invocation(WireModel):
    """One durable call of a WorkflowRun's workflow, run to completion by a Temporal workflow."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["Invocation"] = "Invocation"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InvocationSpec
    status: InvocationStatus | None = None


def revision_problem(value: Any) -> str | None:
    """Why `value` is no revision selector, or None when it is one."""
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if value >= 1:
            return None
    elif isinstance(value, str) and (
        value in REVISION_WORDS or (value.isdigit() and int(value) >= 1)
    ):
        return None
    return 'supported values: "stable", "canary", or a revision number (1 or more)'


def input_bytes(inputs: Any) -> int:
    """The size of `inputs` as compact JSON."""
    return len(json.dumps(inputs, separators=(",", ":"), ensure_ascii=False).encode())
