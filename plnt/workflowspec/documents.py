"""Turning spec bytes into a checked `Workflow`: the only way a spec should be loaded.

Everything that can be wrong with a spec is found here, at load time, and reported at once:
YAML syntax, the model's fields, the inputs JSON Schema, the step graph (duplicate ids,
unknown `needs`, cycles), every template and expression (syntax, unknown names, steps
outside `needs`, sandbox escapes), and the smoke case against the inputs schema. An
invocation therefore never meets a spec error.

Exceptions:

    WorkflowSpecError        base of every error about a workflow spec (sources and digests
                             raise their own subclasses)
    ├── SpecError            the document is not a valid workflow; `.problems` lists each
    │                        problem with its path, and the message names them all
    └── datasets.InvalidDataset
                             an evaluation dataset that is not valid cases, each problem
                             named by case, line and field
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions
import pydantic
import yaml

from plnt.workflowspec import dag, grammars, jsonschemas, model, references, templating
from plnt.workflowspec import errors as source_errors

MAX_SPEC_BYTES = 1024 * 1024
_KINDS = {"model", "http", "transform", "workflow"}


class WorkflowSpecError(Exception):
    """Base of every error about a workflow spec."""


class SpecError(WorkflowSpecError):
    """The document is not a valid workflow; every problem is named with its path."""

    def __init__(self, problems: Sequence[dag.Problem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"invalid workflow spec ({len(self.problems)} problem(s)):\n{lines}")


def parse_workflow(data: bytes) -> model.Workflow:
    """Parse and check a workflow spec (YAML or JSON bytes); raise `SpecError` if invalid."""
    workflow, _ = parse_and_compile(data)
    return workflow


def load_workflow(path: str | Path) -> model.Workflow:
    """Read and parse a spec file; a missing file is a `SpecError` naming the path."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise SpecError([dag.Problem(str(path), f"cannot read: {error.strerror}")]) from error
    return parse_workflow(data)


def parse_and_compile(data: bytes) -> tuple[model.Workflow, templating.CompiledWorkflow]:
    """Like `parse_workflow`, also returning the compiled templates the runner executes."""
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError([dag.Problem("<document>", f"larger than {MAX_SPEC_BYTES} bytes")])
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as error:
        raise SpecError([dag.Problem("<document>", f"not valid YAML: {error}")]) from error
    if not isinstance(document, dict):
        raise SpecError([dag.Problem("<document>", "must be a mapping (a YAML/JSON object)")])
    odd_keys = _non_string_keys(document, "")
    if odd_keys:
        raise SpecError(odd_keys)
    try:
        workflow = model.Workflow.model_validate(document)
    except pydantic.ValidationError as error:
        raise SpecError(_pydantic_problems(error, document)) from error
    problems = _schema_problems(workflow)
    problems += _tool_problems(workflow)
    problems += _call_problems(workflow)
    problems += dag.check_graph(workflow.steps)
    if problems:
        raise SpecError(problems)
    compiled, template_problems = templating.compile_workflow(workflow)
    if template_problems:
        raise SpecError(template_problems)
    return workflow, compiled


def _schema_problems(workflow: model.Workflow) -> list[dag.Problem]:
    problems: list[dag.Problem] = []
    inputs_ok = _check_schema(workflow.inputs, "inputs", problems)
    schema_type = workflow.inputs.get("type")
    if schema_type is not None and schema_type != "object":
        problems.append(dag.Problem("inputs.type", "inputs must be described as an object"))
    if workflow.chat is not None:
        properties = workflow.inputs.get("properties", {})
        if isinstance(properties, dict) and workflow.chat.input not in properties:
            problems.append(
                dag.Problem("chat.input", f"{workflow.chat.input!r} is not an input property")
            )
    smoke = workflow.smoke
    if smoke is not None:
        if smoke.expect.json_schema is not None:
            _check_schema(smoke.expect.json_schema, "smoke.expect.jsonSchema", problems)
        if inputs_ok:
            problems += [
                dag.Problem(
                    jsonschemas.json_path(error.absolute_path, root="smoke.inputs"), error.message
                )
                for error in validate_inputs(workflow, smoke.inputs)
            ]
    return problems


def _non_string_keys(value: Any, path: str) -> list[dag.Problem]:
    """Keys YAML did not read as strings. YAML 1.1 reads a bare `on`, `off`, `yes`, `no` as
    a boolean (and `1` as a number): a field named so would otherwise be reported as
    pydantic's `Keys should be strings`, pointing nowhere near the word written."""
    found: list[dag.Problem] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                found.append(
                    dag.Problem(
                        f"{path or '<document>'}",
                        f"key {key!r} is not a string (YAML reads a bare on/off/yes/no as a "
                        "boolean: quote it, or use the field's documented name)",
                    )
                )
            else:
                found += _non_string_keys(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _non_string_keys(item, f"{path}[{index}]")
    return found


def _tool_problems(workflow: model.Workflow) -> list[dag.Problem]:
    """Tools: unique names, valid parameter schemas; steps: known tools, valid response
    schemas, and for completion steps schemas a grammar can hold the model to."""
    problems: list[dag.Problem] = []
    first: dict[str, int] = {}
    for index, tool in enumerate(workflow.tools):
        where = f"tools[{index}](name={tool.name})"
        if tool.name in first:
            problems.append(
                dag.Problem(
                    f"{where}.name", f"duplicate tool name (first: tools[{first[tool.name]}])"
                )
            )
        first.setdefault(tool.name, index)
        valid = _check_schema(tool.parameters, f"{where}.parameters", problems)
        if valid and tool.parameters.get("type") != "object":
            problems.append(
                dag.Problem(f"{where}.parameters.type", "tool parameters must be an object")
            )
    for index, step in enumerate(workflow.steps):
        if not isinstance(step, model.ModelStep):
            continue
        completion = step.mode == "completion"
        if step.response_format is not None:
            path = dag.step_path(index, step.id, "responseFormat.jsonSchema")
            valid = _check_schema(step.response_format.json_schema, path, problems)
            if valid and completion:
                _check_grammar(step.response_format.json_schema, path, problems)
        for position, name in enumerate(step.tools or []):
            path = dag.step_path(index, step.id, f"tools[{position}]")
            if name not in first:
                problems.append(dag.Problem(path, f"unknown tool {name!r} (not in `tools`)"))
            elif name in (step.tools or [])[:position]:
                problems.append(dag.Problem(path, f"{name!r} is listed twice"))
            elif completion:
                tool = workflow.tools[first[name]]
                where = f"tools[{first[name]}](name={name}).parameters"
                _check_grammar(tool.parameters, where, problems)
    return list(dict.fromkeys(problems))  # a tool used by several steps is named once


def _call_problems(workflow: model.Workflow) -> list[dag.Problem]:
    """Workflow steps: a reference a source understands, pinned (if at all) to the step's
    own digest; the called spec itself is checked when the deploy pulls it."""
    problems: list[dag.Problem] = []
    for index, step in workflow.calls():
        try:
            ref = references.parse(step.ref)
        except source_errors.InvalidReference as error:
            problems.append(dag.Problem(dag.step_path(index, step.id, "ref"), str(error)))
            continue
        if ref.digest is not None and ref.digest != step.digest:
            problems.append(
                dag.Problem(
                    dag.step_path(index, step.id, "ref"),
                    f"pinned to {ref.digest}, but the step's digest is {step.digest}",
                )
            )
    return problems


def _check_grammar(schema: dict[str, Any], path: str, problems: list[dag.Problem]) -> None:
    """A completion step's schemas become grammars: one that cannot is a spec error."""
    try:
        grammars.schema_grammar(schema, path=path)
    except grammars.UnsupportedSchema as error:
        reason = str(error).split(": ", 1)[1]
        problems.append(
            dag.Problem(error.path, f"not supported by a completion step's grammar: {reason}")
        )


def _check_schema(schema: dict[str, Any], path: str, problems: list[dag.Problem]) -> bool:
    try:
        jsonschemas.validator_class(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        where = jsonschemas.json_path(error.absolute_path, root=path)
        problems.append(dag.Problem(where, f"not a valid JSON Schema: {error.message}"))
        return False
    return True


def validate_inputs(
    workflow: model.Workflow, inputs: Any
) -> list[jsonschema.exceptions.ValidationError]:
    """Every violation of the workflow's inputs schema by `inputs`, in a stable order."""
    return input_errors(inputs_validator(workflow), inputs)


def inputs_validator(workflow: model.Workflow) -> jsonschemas.Validator:
    """The validator of the workflow's inputs schema, formats checked: made once by a
    caller that validates many inputs (the runner, per invocation)."""
    return jsonschemas.validator(workflow.inputs, formats=True)


def input_errors(
    validator: jsonschemas.Validator, inputs: Any
) -> list[jsonschema.exceptions.ValidationError]:
    """Every violation of `validator`'s inputs schema by `inputs`, in a stable order."""
    errors = validator.iter_errors(inputs)
    return sorted(errors, key=lambda error: [str(part) for part in error.absolute_path])


def _pydantic_problems(
    error: pydantic.ValidationError, document: dict[str, Any]
) -> list[dag.Problem]:
    problems = []
    for item in error.errors():
        loc = list(item["loc"])
        text = ""
        index = 0
        while index < len(loc):
            part = loc[index]
            if isinstance(part, int):
                text += f"[{part}]"
                if text.startswith("steps") and text.count("[") == 1:
                    text += _step_id_suffix(document, part)
                    # pydantic inserts the discriminator value after the index: drop it.
                    if index + 1 < len(loc) and loc[index + 1] in _KINDS:
                        index += 1
            else:
                text += ("." if text else "") + str(part)
            index += 1
        problems.append(dag.Problem(text or "<document>", item["msg"]))
    return problems


def _step_id_suffix(document: dict[str, Any], index: int) -> str:
    steps = document.get("steps")
    if isinstance(steps, list) and index < len(steps) and isinstance(steps[index], dict):
        step_id = steps[index].get("id")
        if isinstance(step_id, str):
            return f"(id={step_id})"
    return ""
