"""The template sandbox: no Python internals, no mutation, strict undefined, plain tojson."""

from __future__ import annotations

import json

import pytest

from plnt.workflowspec import documents, templating

SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: wf}}
steps: [{{id: a, kind: transform, template: {template}}}]
output: steps.a.output
"""


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__ }}",
        "{{ inputs.__class__.__mro__ }}",
        "{{ inputs['__init__'] }}",
        "{{ cycler.__init__.__globals__ }}",
    ],
)
def test_underscore_attribute_escapes_are_refused_at_load(template: str) -> None:
    with pytest.raises(documents.SpecError, match="refused by the sandbox"):
        documents.parse_workflow(SPEC.format(template=json.dumps(template)).encode())


def render(source: str, **inputs: object) -> str:
    env = templating.make_environment()
    template = templating.Template(source, env.from_string(source))
    return template.render(templating.context(inputs, {}))


@pytest.mark.parametrize(
    ("source", "inputs"),
    [
        ("{{ inputs[name] }}", {"name": "__class__"}),  # a name only known at render time
        ("{{ inputs.q | attr(name) }}", {"q": "x", "name": "__class__"}),
        ("{{ inputs.items.append(1) }}", {"items": [1]}),  # the sandbox is immutable
        ("{{ inputs.q.format.__self__ }}", {"q": "x"}),
    ],
)
def test_escapes_built_at_render_time_fail_in_the_sandbox(
    source: str, inputs: dict[str, object]
) -> None:
    with pytest.raises(templating.RenderError):
        render(source, **inputs)


def test_undefined_names_fail_instead_of_rendering_empty() -> None:
    with pytest.raises(templating.RenderError, match="missing"):
        render("{{ inputs.missing }}")


def test_tojson_is_plain_sorted_json_without_html_escaping() -> None:
    assert render("{{ inputs.v | tojson }}", v={"b": "<&>", "a": 1}) == '{"a": 1, "b": "<&>"}'


def test_expressions_return_native_values_and_refuse_undefined_results() -> None:
    env = templating.make_environment()
    expression = templating.Expression("x", env.compile_expression("[inputs.a, inputs.a * 2]"))
    assert expression.evaluate({"inputs": {"a": 2}, "steps": {}}) == [2, 4]
    missing = templating.Expression(
        "x", env.compile_expression("inputs.b", undefined_to_none=False)
    )
    with pytest.raises(templating.RenderError):
        missing.evaluate({"inputs": {}, "steps": {}})
