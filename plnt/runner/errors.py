"""The runner's exception tree; each error knows the HTTP status it is answered with.

    RunnerError                   base (500)
    ├── InvalidRequest            the body is not what the endpoint takes (400)
    ├── ModelNotFound             a chat request names a model this runner does not serve (404)
    ├── InvalidInputs             inputs fail the workflow's schema (422); `.problems` has paths
    ├── OutputFailed              the output expression failed (500)
    ├── DeadlineExceeded          the call's deadline ran out; `.hop` names where (504)
    ├── Overloaded                a backend's queue refused the call (503, Retry-After);
    │                             `.backend` and `.queue` name them
    └── StepFailed                a step failed; `.step` names it (500)
        ├── StepBackendFailed     the backend or HTTP target was down or answered an error (502)
        ├── StepTimedOut          an attempt outlived the step's timeoutSeconds (504)
        └── StepInvalidOutput     the model's answer was unusable: not JSON, or not valid for
            │                     the step's `responseFormat` (the message names the path) (502)
            └── StepTurnsExhausted  a tool loop reached `maxTurns` without a final answer (502)

Backend errors (`plnt.runner.backends.BackendError`) are translated into `StepFailed`
subclasses exactly once, in the executor, with the cause chained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class InputProblem:
    """One way the inputs fail the schema: a JSON path like `$.items[2].name`, and why."""

    path: str
    message: str


class RunnerError(Exception):
    """Base of every runner error.

    `code` and `param` fill OpenAI's error fields of the same names: `code` is the HTTP
    status unless a subclass names a code of OpenAI's own (`model_not_found`).
    """

    status = 500
    type = "runner_error"
    code: str | None = None
    param: str | None = None


class InvalidRequest(RunnerError):
    """The request body is malformed."""

    status = 400
    type = "invalid_request_error"


class ModelNotFound(RunnerError):
    """A chat request names a model other than the workflow this runner serves."""

    status = 404
    type = "invalid_request_error"
    code = "model_not_found"
    param = "model"

    def __init__(self, model: str, served: str) -> None:
        super().__init__(
            f"The model `{model}` does not exist: this endpoint serves the model `{served}`"
        )


class InvalidInputs(RunnerError):
    """The inputs do not satisfy the workflow's inputs schema."""

    status = 422
    type = "invalid_inputs"

    def __init__(self, problems: Sequence[InputProblem]) -> None:
        self.problems = list(problems)
        named = "; ".join(f"{problem.path}: {problem.message}" for problem in self.problems)
        super().__init__(f"inputs do not match the workflow's schema: {named}")


class OutputFailed(RunnerError):
    """The output expression could not be evaluated."""

    type = "output_failed"


class DeadlineExceeded(RunnerError):
    """The call's deadline (`X-Plnt-Timeout-Ms`) ran out; `hop` says where: before a step
    started, in a backend's queue, or during a backend call."""

    status = 504
    type = "deadline_exceeded"

    def __init__(self, hop: str, message: str) -> None:
        self.hop = hop
        super().__init__(f"deadline exceeded at {hop}: {message}")


class Overloaded(RunnerError):
    """A backend had no room for the call: its queue was full (or full of more critical
    calls), the call waited its queue's longest, or its breaker is open. Answered at once,
    with `Retry-After`, so callers back off instead of piling on."""

    status = 503
    type = "overloaded"

    def __init__(
        self, message: str, *, backend: str, queue: str, retry_after_seconds: int = 1
    ) -> None:
        self.backend = backend
        self.queue = queue
        self.retry_after_seconds = retry_after_seconds
        super().__init__(f"backend {backend} ({queue}): {message}")


class StepFailed(RunnerError):
    """A step failed; the message names it."""

    type = "step_failed"

    def __init__(self, step: str, message: str) -> None:
        self.step = step
        super().__init__(f"step {step!r}: {message}")


class StepBackendFailed(StepFailed):
    """The step's backend or HTTP target is unreachable or answered with an error."""

    status = 502
    type = "bad_gateway"


class StepTimedOut(StepFailed):
    """An attempt of the step took longer than its timeout."""

    status = 504
    type = "gateway_timeout"


class StepInvalidOutput(StepFailed):
    """The model answered, but not what the step asked for: not JSON, or JSON that breaks
    the step's `responseFormat` schema (the message names the JSON path)."""

    status = 502
    type = "invalid_model_output"


class StepTurnsExhausted(StepInvalidOutput):
    """A model step with tools took `maxTurns` turns and still gave no final answer."""

    type = "max_turns_exhausted"

    def __init__(self, step: str, *, turns: int, tool_calls: int) -> None:
        self.turns = turns
        super().__init__(
            step,
            f"no final answer after {turns} turn(s) (maxTurns {turns}), "
            f"{tool_calls} tool call(s) made",
        )
