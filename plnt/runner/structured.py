"""Structured output: asking a backend for JSON of a schema, and checking what it answered.

A model step with `responseFormat` is constrained where the backend can be: a chat call
carries OpenAI's `response_format` (`json_schema`), a completion call a GBNF `grammar`
made from the schema (`plnt.workflowspec.grammars`). Either way the answer is parsed and
validated here, because a constraint is a request the backend may not honour (a server
without grammars, a model cut off at `maxTokens`): a step's output is the parsed JSON
only when it is valid, and otherwise a `StepInvalidOutput` naming the JSON path.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from plnt.runner import errors
from plnt.workflowspec import grammars, model


def chat_response_format(response_format: model.ResponseFormat) -> dict[str, Any]:
    """OpenAI's `response_format` body field for the step's schema."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": response_format.name,
            "schema": response_format.json_schema,
            "strict": True,
        },
    }


@functools.lru_cache(maxsize=256)
def _grammar(schema_text: str) -> str:
    return grammars.schema_grammar(json.loads(schema_text))


def completion_grammar(response_format: model.ResponseFormat) -> str:
    """The GBNF grammar for the step's schema (made once per schema)."""
    return _grammar(json.dumps(response_format.json_schema, sort_keys=True))


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> jsonschema.protocols.Validator:
    schema = json.loads(schema_text)
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator
    )
    return validator_class(schema)


def validator_for(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator of `schema` (made once per schema, kept: the spec's schemas are few)."""
    return _validator(json.dumps(schema, sort_keys=True))


def json_path(parts: Sequence[str | int] | Any) -> str:
    """`$.a[2].b` for a jsonschema error path."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def violations(schema: dict[str, Any], value: Any) -> list[str]:
    """Every way `value` breaks `schema`, each as `PATH: message`, in a stable order."""
    found = sorted(
        validator_for(schema).iter_errors(value),
        key=lambda error: [str(part) for part in error.absolute_path],
    )
    return [f"{json_path(error.absolute_path)}: {error.message}" for error in found]


def parse_json(step: str, text: str) -> Any:
    """The model's answer as JSON, or `StepInvalidOutput` saying where it stopped being JSON."""
    try:
        return json.loads(text)
    except ValueError as error:
        shown = text if len(text) <= 120 else text[:117] + "..."
        raise errors.StepInvalidOutput(
            step, f"the answer is not JSON ({error}): {shown!r}"
        ) from error


def check(step: str, value: Any, response_format: model.ResponseFormat) -> Any:
    """`value` when it satisfies the step's schema, else `StepInvalidOutput` naming paths."""
    problems = violations(response_format.json_schema, value)
    if problems:
        raise errors.StepInvalidOutput(
            step, "the answer does not match responseFormat: " + "; ".join(problems[:5])
        )
    return value
