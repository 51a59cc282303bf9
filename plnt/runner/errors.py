"""The runner's exception tree; each error knows the HTTP status it is answered with.

    RunnerError                   base (500)
    ├── InvalidRequest            the body is not what the endpoint takes (400)
    ├── InvalidInputs             inputs fail the workflow's schema (422); `.problems` has paths
    ├── OutputFailed              the output expression failed (500)
    └── StepFailed                a step failed; `.step` names it (500)
        ├── StepBackendFailed     the backend or HTTP target was down or answered an error (502)
        └── StepTimedOut          an attempt outlived the step's timeoutSeconds (504)

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
    """Base of every runner error."""

    status = 500
    type = "runner_error"


class InvalidRequest(RunnerError):
    """The request body is malformed."""

    status = 400
    type = "invalid_request_error"


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
