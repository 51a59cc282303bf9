"""The workflow spec (`microagents.plnt.work/v1`, kind `Workflow`) as pydantic models.

The spec is a public format: these models are its single definition, and the published
JSON Schema (`docs/spec/workflow.schema.json`) is generated from them. They hold data only;
checks that need more than one field at a time (the DAG, templates, the inputs schema) live
in `plnt.workflowspec.documents`, which is the only way a spec should be loaded.

Field names are camelCase on the wire (`maxTokens`, `timeoutSeconds`), snake_case in Python.
Unknown fields are refused so that a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

API_VERSION = "microagents.plnt.work/v1"
KIND = "Workflow"

# Step ids are identifiers so that templates can say `steps.outline.output`.
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"


class SpecModel(BaseModel):
    """Base of every spec object: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


class Metadata(SpecModel):
    """Who the workflow is: a DNS-style name, a free-form version, a description, labels."""

    name: str = Field(pattern=NAME_PATTERN, description="DNS-1123 style name of the workflow.")
    version: str | None = Field(default=None, description="Free-form version, e.g. 1.2.0.")
    description: str | None = Field(default=None, description="What the workflow does.")
    labels: dict[str, str] = Field(default_factory=dict, description="String labels.")


RetryableError = Literal["timeout", "backend", "output"]
"""What a failed attempt may be retried for: it timed out, the backend (or HTTP target)
failed, or the model's answer was unusable (not schema-valid, or no final answer within
`maxTurns`)."""


DEFAULT_RETRY_ON: tuple[RetryableError, ...] = ("timeout", "backend")


class Retry(SpecModel):
    """How a step's failed attempts are tried again: how often, how long apart, and after
    which failures (Argo Workflows' `retryStrategy`, reduced to what a step needs)."""

    attempts: int = Field(
        default=3, ge=1, le=10, description="Attempts in all, the first one included."
    )
    backoff_seconds: float = Field(
        default=0.05, ge=0, le=60, description="Wait before the second attempt."
    )
    backoff_factor: float = Field(
        default=2.0, ge=1, le=10, description="Each later wait is the one before times this."
    )
    max_backoff_seconds: float = Field(
        default=1.0, ge=0, le=300, description="No wait is longer than this."
    )
    # Not `on`: YAML 1.1 (PyYAML) reads a bare `on` key as the boolean true.
    retry_on: list[RetryableError] = Field(
        default_factory=lambda: list(DEFAULT_RETRY_ON),
        min_length=1,
        description="The failures that are retried: timeout, backend, output.",
    )


class StepBase(SpecModel):
    """What every step has: an id, its dependencies, and how it is run."""

    id: str = Field(pattern=STEP_ID_PATTERN, description="Unique step id (an identifier).")
    needs: list[str] = Field(
        default_factory=list, description="Ids of steps that must finish before this one."
    )
    timeout_seconds: float = Field(
        default=60.0, gt=0, le=3600, description="Limit for one attempt of this step."
    )
    retries: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Extra attempts after a backend failure or timeout (`retry` says more).",
    )
    retry: Retry | None = Field(
        default=None,
        description="Attempts, backoff and the failures retried; instead of `retries`.",
    )
    cache: bool = Field(
        default=True, description="Whether the step's output may be served from the step cache."
    )
    when: str | None = Field(
        default=None,
        description="Expression over `inputs` and `steps`: the step runs only when it is "
        "true; otherwise it is skipped (output none, `steps.ID.skipped` true).",
    )
    for_each: str | None = Field(
        default=None,
        description="Expression giving a list: the step runs once per element (templates "
        "see `item` and `index`) and its output is the list of results, in order.",
    )
    max_parallel: int = Field(
        default=4, ge=1, le=64, description="With `forEach`: elements run at once, at most."
    )
    continue_on_error: bool = Field(
        default=False,
        description="With `forEach`: a failed element gives none in the output list instead "
        "of failing the step.",
    )

    @model_validator(mode="after")
    def _one_way_to_retry(self) -> StepBase:
        if self.retry is not None and self.retries:
            raise ValueError("give `retry` or `retries`, not both")
        for name in ("max_parallel", "continue_on_error"):
            if self.for_each is None and name in self.model_fields_set:
                raise ValueError(f"`{to_camel(name)}` applies only to a step with `forEach`")
        return self

    def retry_policy(self) -> Retry:
        """The step's retry policy: `retry`, or `retries` read as extra attempts after a
        timeout or a backend failure (the older field, still valid)."""
        if self.retry is not None:
            return self.retry
        return Retry(attempts=self.retries + 1)


class Message(SpecModel):
    """One chat message; `content` is a template."""

    role: Literal["system", "user", "assistant"] = Field(description="Chat role.")
    content: str = Field(description="Template rendered over `inputs` and `steps`.")


class ResponseFormat(SpecModel):
    """The JSON a model step must answer: the backend is constrained to it where it can be
    (OpenAI's `response_format` on chat, a grammar on completions) and the runner checks it."""

    json_schema: dict[str, Any] = Field(
        description="JSON Schema of the answer; the step's output is the parsed JSON."
    )
    name: str = Field(
        default="output",
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The schema's name, as OpenAI's `json_schema.name` wants one.",
    )


class ToolHttp(SpecModel):
    """A tool implemented by an HTTP call; templates see `arguments` and `inputs`."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = Field(
        default="POST", description="HTTP method."
    )
    url: str = Field(description="URL template; must render to an http(s) URL.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Header values are templates."
    )
    body: str | None = Field(
        default="{{ arguments | tojson }}",
        description="Request body template (default: the arguments as JSON).",
    )
    response: Literal["auto", "json", "text"] = Field(
        default="auto", description="How to read the body: by Content-Type, JSON, or text."
    )
    timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="Limit for one call of the tool."
    )


TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"


class Tool(SpecModel):
    """A function a model step may call: what the model is told, and how it is run."""

    name: str = Field(pattern=TOOL_NAME_PATTERN, description="Unique tool name.")
    description: str = Field(min_length=1, description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of the arguments (an object); calls are checked against it.",
    )
    idempotent: bool = Field(
        default=False,
        description="Calling it twice with the same arguments does no more than once; a "
        "step using only idempotent tools may be cached.",
    )
    http: ToolHttp = Field(description="The tool's implementation: an HTTP call.")


class ModelStep(StepBase):
    """A call to the run's model backend; its output is the generated text.

    `mode: chat` (the default) sends chat messages to the chat completions API.
    `mode: completion` sends `prompt` as plain text to the completions API and the output
    is its continuation: the way a pretrained base model is used, which follows no
    instructions and may carry no chat template, so a chat gets nothing useful from it.
    """

    kind: Literal["model"] = Field(description="Step kind.")
    mode: Literal["chat", "completion"] = Field(
        default="chat",
        description="chat: chat completions over `messages` (or `prompt` as one user "
        "message). completion: a plain text completion continuing `prompt`.",
    )
    messages: list[Message] | None = Field(
        default=None,
        min_length=1,
        description="Chat messages (templates); chat mode only. Or use `prompt`.",
    )
    prompt: str | None = Field(
        default=None,
        description="A template. Chat mode: shorthand for a single user message. "
        "Completion mode: the text the model continues.",
    )
    model: str | None = Field(
        default=None, description="Model name; defaults to the backend's configured model."
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int | None = Field(default=None, ge=1, description="Upper bound on reply tokens.")
    stop: list[Annotated[str, Field(min_length=1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=4,
        description="Up to 4 sequences at which generation stops; they are not part of the output.",
    )
    seed: int | None = Field(
        default=None,
        description="Sampling seed, for backends that honour it: with temperature 0 (or a "
        "seed) the same request gives the same text.",
    )
    response_format: ResponseFormat | None = Field(
        default=None,
        description="The JSON Schema the answer must satisfy; the output is the parsed JSON.",
    )
    tools: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="Names of spec-level `tools` the model may call, in a loop of turns.",
    )
    max_turns: int = Field(
        default=8,
        ge=1,
        le=32,
        description="With `tools`: model calls at most, before the step fails without answer.",
    )
    max_parallel_tool_calls: int = Field(
        default=4, ge=1, le=32, description="With `tools`: tool calls of one turn run at once."
    )

    @model_validator(mode="after")
    def _exactly_one_of_messages_or_prompt(self) -> ModelStep:
        if self.mode == "completion":
            if self.prompt is None or self.messages is not None:
                raise ValueError("a completion step continues `prompt` and takes no `messages`")
        elif (self.messages is None) == (self.prompt is None):
            raise ValueError("exactly one of `messages` or `prompt` must be given")
        if self.tools is None:
            for name in ("max_turns", "max_parallel_tool_calls"):
                if name in self.model_fields_set:
                    raise ValueError(f"`{to_camel(name)}` applies only to a step with `tools`")
        return self

    def message_templates(self) -> list[Message]:
        """The chat messages to render, with `prompt` expanded to one user message
        (empty in completion mode, which renders `prompt` itself)."""
        if self.mode == "completion":
            return []
        if self.messages is not None:
            return list(self.messages)
        return [Message(role="user", content=self.prompt or "")]


class HttpStep(StepBase):
    """An HTTP call; its output is the response body (parsed JSON when it is JSON)."""

    kind: Literal["http"] = Field(description="Step kind.")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = Field(
        default="GET", description="HTTP method."
    )
    url: str = Field(description="URL template; must render to an http(s) URL.")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Header values are templates."
    )
    body: str | None = Field(default=None, description="Request body template.")
    response: Literal["auto", "json", "text"] = Field(
        default="auto",
        description="How to read the body: by Content-Type (auto), always JSON, or text.",
    )
    cache: bool = Field(
        default=False, description="HTTP calls may have effects: caching is opt-in."
    )


class TransformStep(StepBase):
    """Pure templating over inputs and earlier outputs; no I/O."""

    kind: Literal["transform"] = Field(description="Step kind.")
    template: str | None = Field(default=None, description="Template rendering to a string.")
    expression: str | None = Field(
        default=None, description="Expression evaluating to any JSON value (list, object ...)."
    )

    @model_validator(mode="after")
    def _exactly_one_of_template_or_expression(self) -> TransformStep:
        if (self.template is None) == (self.expression is None):
            raise ValueError("exactly one of `template` or `expression` must be given")
        return self


DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"


class WorkflowStep(StepBase):
    """A call of another workflow, pinned by reference and digest; its output is that
    workflow's output.

    The deploy's pull fetches the called spec with the caller (and verifies its digest, and
    its signature when the run requires one), so a revision pins its whole tree of
    workflows; the runner gets the tree with the revision and never fetches at invoke time.
    """

    kind: Literal["workflow"] = Field(description="Step kind.")
    ref: str = Field(
        min_length=1,
        description="Where the called spec lives: oci://, s3:// or oci-layout: (a relative "
        "layout path is inside the deploy's layout root).",
    )
    digest: str = Field(
        pattern=DIGEST_PATTERN, description="sha256 of the called spec's bytes (the pin)."
    )
    inputs: dict[Annotated[str, Field(pattern=STEP_ID_PATTERN)], str] = Field(
        default_factory=dict,
        description="The called workflow's inputs: name to an expression over the caller's "
        "`inputs` and `steps` (and `item`, `index` in a `forEach`).",
    )
    cache: bool = Field(
        default=False,
        description="The called workflow's steps use their own cache; caching the whole "
        "call is opt-in.",
    )


AnyStep = ModelStep | HttpStep | TransformStep | WorkflowStep
"""Any one step, whatever its kind."""

Step = Annotated[AnyStep, Field(discriminator="kind")]


class Expectations(SpecModel):
    """What the smoke case's output must satisfy; every given check must pass."""

    equals: Any = Field(default=None, description="The output equals this JSON value.")
    contains: str | None = Field(
        default=None, description="The output (as text) contains this substring."
    )
    json_schema: dict[str, Any] | None = Field(
        default=None, description="The output validates against this JSON Schema."
    )


class Smoke(SpecModel):
    """One known-good invocation, run before a revision is promoted."""

    inputs: dict[str, Any] = Field(description="Inputs; must satisfy the inputs schema.")
    expect: Expectations = Field(description="Checks on the output.")


class ChatMapping(SpecModel):
    """How `/v1/chat/completions` turns the last user message into inputs."""

    input: str = Field(description="Name of the input property that receives the message text.")


class Workflow(SpecModel):
    """A workflow: inputs schema, a DAG of steps, an output expression and a smoke case."""

    api_version: Literal["microagents.plnt.work/v1"] = Field(description="Spec version.")
    kind: Literal["Workflow"] = Field(description="Always Workflow.")
    metadata: Metadata
    inputs: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"},
        description="JSON Schema (draft 2020-12 unless `$schema` says otherwise) of the inputs.",
    )
    steps: list[Step] = Field(
        min_length=1, max_length=256, description="The steps, a DAG through `needs`."
    )
    output: str = Field(
        description="Expression over `inputs` and `steps` giving the workflow's output."
    )
    tools: list[Tool] = Field(
        default_factory=list,
        max_length=64,
        description="Functions model steps may call (a step lists the ones it uses).",
    )
    chat: ChatMapping | None = Field(
        default=None, description="Mapping for the OpenAI-compatible endpoint (optional)."
    )
    smoke: Smoke | None = Field(default=None, description="A smoke case.")

    def tool(self, name: str) -> Tool:
        """The tool with this name (KeyError if there is none)."""
        for candidate in self.tools:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    def calls(self) -> list[tuple[int, WorkflowStep]]:
        """The steps that call another workflow, with their positions."""
        return [
            (index, step) for index, step in enumerate(self.steps) if isinstance(step, WorkflowStep)
        ]

    def step(self, step_id: str) -> AnyStep:
        """The step with this id (KeyError if there is none)."""
        for candidate in self.steps:
            if candidate.id == step_id:
                return candidate
        raise KeyError(step_id)
