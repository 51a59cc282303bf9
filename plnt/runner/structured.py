"""Structured output: asking a backend for JSON of a schema, and checking what it answered.

A model step with `responseFormat` is constrained where the backend can be: a chat call
carries OpenAI's `response_format` (`json_schema`), a completion call a GBNF `grammar`
made from the schema (`plnt.workflowspec.grammars`). Either way the answer is parsed and
validated here, because a constraint is a request the backend may not honour (a server
without grammars, a model cut off at `maxTokens`): a step's output is the parsed JSON
only when it is valid, and otherwise a `StepInvalidOutput` naming the JSON path.

The request fields, the grammars and the validators are made once per step at start-up
(`Schemas`), never per call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plnt.runner import errors
from plnt.workflowspec import grammars, jsonschemas, model

Validator = jsonschemas.Validator


@dataclass(frozen=True)
class Schemas:
    """One model step's schemas, compiled once at start-up (the spec's schemas are few and
    fixed): the request fields that ask the backend for them (`extra`: OpenAI's
    `response_format` and `tools` on chat, the GBNF `grammar` on completions), the validator
    of its answer and those of its tools' arguments, by tool name."""

    step: str
    extra: dict[str, Any]
    answer: Validator | None
    tools: dict[str, Validator]

    @classmethod
    def of(cls, step: model.ModelStep, tools: Sequence[model.Tool]) -> Schemas:
        """The schemas of `step`, which may call `tools` (in its order)."""
        form = step.response_format
        schema = None if form is None else form.json_schema
        extra: dict[str, Any] = {}
        if step.mode == "completion" and tools:
            parameters = [(tool.name, tool.parameters) for tool in tools]
            extra["grammar"] = grammars.agent_grammar(parameters, schema)
        elif step.mode == "completion" and schema is not None:
            extra["grammar"] = grammars.schema_grammar(schema)
        else:
            if tools:
                extra["tools"] = [_tool_definition(tool) for tool in tools]
                extra["tool_choice"] = "auto"
            if form is not None:
                extra["response_format"] = _chat_response_format(form)
        return cls(
            step=step.id,
            extra=extra,
            answer=None if schema is None else jsonschemas.validator(schema),
            tools={tool.name: jsonschemas.validator(tool.parameters) for tool in tools},
        )

    def parse(self, text: str) -> Any:
        """The answer's text as the step's output: itself, or with `responseFormat` the
        parsed JSON, checked (`StepInvalidOutput` when it is not JSON or breaks the schema)."""
        if self.answer is None:
            return text
        return self.check(parse_json(self.step, text))

    def check(self, value: Any) -> Any:
        """`value` when it satisfies the step's `responseFormat`, else `StepInvalidOutput`
        naming paths."""
        if self.answer is None:
            return value
        problems = violations(self.answer, value)
        if problems:
            raise errors.StepInvalidOutput(
                self.step, "the answer does not match responseFormat: " + "; ".join(problems[:5])
            )
        return value


def _chat_response_format(response_format: model.ResponseFormat) -> dict[str, Any]:
    """OpenAI's `response_format` body field for the step's schema."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": response_format.name,
            "schema": response_format.json_schema,
            "strict": True,
        },
    }


def _tool_definition(tool: model.Tool) -> dict[str, Any]:
    """One entry of OpenAI's `tools` body field."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def violations(validator: Validator, value: Any) -> list[str]:
    """Every way `value` breaks the validator's schema, each as `PATH: message`, in a
    stable order."""
    found = sorted(
        validator.iter_errors(value),
        key=lambda error: [str(part) for part in error.absolute_path],
    )
    return [f"{jsonschemas.json_path(error.absolute_path)}: {error.message}" for error in found]


def parse_json(step: str, text: str) -> Any:
    """The model's answer as JSON, or `StepInvalidOutput` saying where it stopped being JSON."""
    try:
        return json.loads(text)
    except ValueError as error:
        shown = text if len(text) <= 120 else text[:117] + "..."
        raise errors.StepInvalidOutput(
            step, f"the answer is not JSON ({error}): {shown!r}"
        ) from error
