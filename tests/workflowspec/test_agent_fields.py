"""Loading specs with the fields of agents (`tools`, `responseFormat`, `maxTurns`, `when`,
`forEach`, `retry` …): every mistake is a `SpecError` naming the field's path, and
documents written before these fields existed load as they did."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.workflowspec import documents

REPO = Path(__file__).resolve().parents[2]

BASE = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: agent}
inputs: {type: object, properties: {q: {type: string}}}
tools:
  - name: add
    description: Adds.
    parameters: {type: object, properties: {a: {type: integer}}, required: [a]}
    http: {url: "http://127.0.0.1:1/add"}
steps:
  - id: solve
    kind: model
    prompt: "{{ inputs.q }}"
    tools: [add]
output: steps.solve.output
"""


def problems(text: str) -> list[str]:
    with pytest.raises(documents.SpecError) as caught:
        documents.parse_workflow(text.encode())
    return [str(problem) for problem in caught.value.problems]


def test_a_spec_with_tools_a_loop_a_map_a_condition_and_a_retry_policy_loads() -> None:
    text = BASE.replace(
        "    tools: [add]\n",
        "    tools: [add]\n    maxTurns: 4\n    responseFormat: {jsonSchema: {type: string}}\n"
        "  - id: each\n    kind: transform\n    needs: [solve]\n    forEach: '[1, 2]'\n"
        "    maxParallel: 2\n    continueOnError: true\n    when: steps.solve.output != ''\n"
        "    expression: item * index\n"
        "    retry: {attempts: 2, backoffSeconds: 0.1, retryOn: [timeout, output]}\n",
    )
    workflow = documents.parse_workflow(text.encode())
    assert workflow.tool("add").parameters["required"] == ["a"]
    each = workflow.step("each")
    assert each.max_parallel == 2 and each.retry_policy().retry_on == ["timeout", "output"]


def test_a_step_naming_an_unknown_tool_is_refused_at_its_path() -> None:
    assert problems(BASE.replace("tools: [add]", "tools: [add, mul]")) == [
        "steps[0](id=solve).tools[1]: unknown tool 'mul' (not in `tools`)"
    ]


def test_a_duplicate_tool_and_parameters_that_are_not_an_object_are_named() -> None:
    text = BASE.replace(
        "steps:",
        "  - name: add\n    description: Again.\n    parameters: {type: array}\n"
        "    http: {url: 'http://127.0.0.1:1/x'}\nsteps:",
    )
    assert problems(text) == [
        "tools[1](name=add).name: duplicate tool name (first: tools[0])",
        "tools[1](name=add).parameters.type: tool parameters must be an object",
    ]


def test_an_invalid_response_schema_is_named_by_its_path() -> None:
    text = BASE.replace("    tools: [add]\n", "    responseFormat: {jsonSchema: {type: 12}}\n")
    (problem,) = problems(text)
    assert problem.startswith("steps[0](id=solve).responseFormat.jsonSchema.type: not a valid")


def test_a_completion_step_refuses_schemas_a_grammar_cannot_hold_the_model_to() -> None:
    text = BASE.replace("    tools: [add]\n", "    mode: completion\n    tools: [add]\n").replace(
        "properties: {a: {type: integer}}", "properties: {a: {type: string, pattern: '^a'}}"
    )
    assert problems(text) == [
        "tools[0](name=add).parameters.properties.a.pattern: "
        "not supported by a completion step's grammar: not supported in a grammar"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("    tools: [add]\n", "    maxTurns: 3\n"),
            "steps[0](id=solve): Value error, `maxTurns` applies only to a step with `tools`",
        ),
        (
            ("    tools: [add]\n", "    tools: [add]\n    maxTurns: 99\n"),
            "steps[0](id=solve).maxTurns: Input should be less than or equal to 32",
        ),
        (
            ("    tools: [add]\n", "    maxParallel: 2\n"),
            "steps[0](id=solve): Value error, `maxParallel` applies only to a step with `forEach`",
        ),
        (
            ("    tools: [add]\n", "    retries: 1\n    retry: {attempts: 2}\n"),
            "steps[0](id=solve): Value error, give `retry` or `retries`, not both",
        ),
        (
            ("    tools: [add]\n", "    retry: {attempts: 2, retryOn: [crash]}\n"),
            "steps[0](id=solve).retry.retryOn[0]: Input should be 'timeout', 'backend' or 'output'",
        ),
        (
            ("    tools: [add]\n", "    retry: {attempts: 2, on: [timeout]}\n"),
            "steps[0].retry: key True is not a string (YAML reads a bare on/off/yes/no as a "
            "boolean: quote it, or use the field's documented name)",
        ),
        (
            ("    tools: [add]\n", "    responseFormat: {schema: {}}\n"),
            "steps[0](id=solve).responseFormat.jsonSchema: Field required",
        ),
    ],
)
def test_each_new_field_is_named_when_it_is_wrong(change: tuple[str, str], expected: str) -> None:
    assert expected in problems(BASE.replace(*change))


def test_templates_see_item_and_index_only_in_a_for_each_step() -> None:
    text = BASE.replace('prompt: "{{ inputs.q }}"', 'prompt: "{{ item }}"')
    assert problems(text) == [
        "steps[0](id=solve).prompt: unknown name 'item' (templates see `inputs` and `steps`)"
    ]


def test_when_and_for_each_are_checked_like_every_expression() -> None:
    text = BASE.replace(
        "    tools: [add]\n", "    when: steps.later.output\n    forEach: inputs.q +\n"
    )
    found = problems(text)
    assert found[0] == "steps[0](id=solve).when: unknown step 'later'"
    assert found[1].startswith("steps[0](id=solve).forEach: expression syntax error")


def test_a_tool_template_sees_arguments_and_inputs_and_nothing_else() -> None:
    text = BASE.replace('http://127.0.0.1:1/add"', 'http://127.0.0.1:1/{{ steps.x }}"')
    assert problems(text) == [
        "tools[0](name=add).http.url: unknown name 'steps' (templates see `arguments` and `inputs`)"
    ]


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.workflow.yaml")))
def test_every_example_loads(path: Path) -> None:
    documents.load_workflow(path)
