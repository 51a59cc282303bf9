"""`kind: workflow` steps in the runner: the called workflows, and one call of one.

The runner is handed its revision's spec bytes: a plain spec, or a bundle of the spec and
every workflow its tree calls, keyed by digest (`plnt.workflowspec.bundles`; the deploy's
pull fetched and verified them). `load` unpacks and compiles them all at start-up, and
refuses a bundle that lacks a called digest, so — as with every other spec error — an
invocation never meets one.

A call runs the called workflow in its own `Executor` (same backend, HTTP session, step
cache and metrics; built once per digest by the caller's executor) over the inputs the
step's expressions gave, checked against the called workflow's inputs schema. Its output
is the step's output and its trace is nested under the step's entry (`steps`). A failure
inside is the step's failure of the same kind (a timeout stays a timeout, a backend
failure a backend failure), so the step's own `retry` reads it as it reads any other; the
called steps' own retries and timeouts apply inside. The call is one unit for durable
invocations: a resumed invocation whose workflow step had finished reuses its output, one
that had not runs the call again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from plnt.api.headers import CacheMode
from plnt.runner import errors, executions
from plnt.workflowspec import bundles, dag, documents, model, templating


@dataclass(frozen=True)
class Library:
    """The called workflows of a revision, parsed and compiled, by digest."""

    workflows: dict[str, tuple[model.Workflow, templating.CompiledWorkflow]] = field(
        default_factory=dict
    )

    def called(
        self, step: model.WorkflowStep
    ) -> tuple[model.Workflow, templating.CompiledWorkflow]:
        return self.workflows[step.digest]


EMPTY = Library()


class Called(Protocol):
    """What a call needs of the called workflow's executor (`plnt.runner.executing`), named
    here so this module, which the executor imports, does not import it back."""

    @property
    def workflow(self) -> model.Workflow: ...

    def validate_inputs(self, inputs: Any) -> dict[str, Any]: ...

    async def run(
        self, inputs: dict[str, Any], *, cache_mode: CacheMode
    ) -> executions.Execution: ...


def load(
    data: bytes,
) -> tuple[model.Workflow, templating.CompiledWorkflow, Library]:
    """The top workflow, compiled, and the library of what it calls, from a runner's spec
    bytes (each spec parsed and compiled once).

    `documents.SpecError` for a bundle whose entries do not match their digests, a called
    spec that is not valid, or a call whose digest the bundle does not hold (each named by
    the calling step's path).
    """
    bundle = bundles.unpack(data)
    workflows: dict[str, tuple[model.Workflow, templating.CompiledWorkflow]] = {}
    problems: list[dag.Problem] = []
    for digest, spec in bundle.workflows.items():
        try:
            workflows[digest] = documents.parse_and_compile(spec)
        except documents.SpecError as error:
            problems += [
                dag.Problem(f"<bundle>.workflows[{digest}] {problem.path}", problem.message)
                for problem in error.problems
            ]
    if problems:
        raise documents.SpecError(problems)
    top, compiled = documents.parse_and_compile(bundle.spec)
    for name, workflow in [("", top), *((f"{d} ", w) for d, (w, _) in workflows.items())]:
        for index, step in workflow.calls():
            if step.digest not in workflows:
                problems.append(
                    dag.Problem(
                        f"{name}{dag.step_path(index, step.id, 'digest')}",
                        f"{step.digest} is not in the revision's bundle (was it pulled?)",
                    )
                )
    if problems:
        raise documents.SpecError(problems)
    return top, compiled, Library(workflows)


def resolve(
    step: model.WorkflowStep, templates: templating.StepTemplates, context: dict[str, Any]
) -> dict[str, Any]:
    """The call as the step cache keys it: the digest and the inputs the expressions gave."""
    inputs = {name: expression.evaluate(context) for name, expression in templates.inputs.items()}
    return {"workflow": step.digest, "inputs": inputs}


async def call(
    child: Called,
    step: model.WorkflowStep,
    resolved: dict[str, Any],
    *,
    cache_mode: CacheMode,
) -> executions.Execution:
    """Run the called workflow once over the resolved inputs; errors become the step's."""
    name = child.workflow.metadata.name
    try:
        inputs = child.validate_inputs(resolved["inputs"])
    except errors.InvalidInputs as error:
        raise errors.StepFailed(step.id, f"inputs of workflow {name!r}: {error}") from error
    try:
        return await child.run(inputs, cache_mode=cache_mode)
    except errors.StepTimedOut as error:
        raise errors.StepTimedOut(step.id, f"in workflow {name!r}: {error}") from error
    except errors.StepBackendFailed as error:
        raise errors.StepBackendFailed(step.id, f"in workflow {name!r}: {error}") from error
    except errors.StepInvalidOutput as error:
        raise errors.StepInvalidOutput(step.id, f"in workflow {name!r}: {error}") from error
    except errors.RunnerError as error:
        raise errors.StepFailed(step.id, f"in workflow {name!r}: {error}") from error
