"""Loading specs: valid examples load; every spec error surfaces at load with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.workflowspec import documents, model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HEAD = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: wf}
inputs: {type: object, properties: {q: {type: string}}}
output: steps.a.output
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(documents.SpecError) as caught:
        documents.parse_workflow(text.encode())
    assert isinstance(caught.value, documents.WorkflowSpecError)
    for problem in caught.value.problems:
        assert str(problem) in str(caught.value)  # the message names every problem
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize(
    "name", ["chat.workflow.yaml", "fanout.workflow.yaml", "complete.workflow.yaml"]
)
def test_the_examples_load(name: str) -> None:
    workflow = documents.load_workflow(EXAMPLES / name)
    assert workflow.api_version == model.API_VERSION
    assert workflow.smoke is not None


def test_fields_are_camel_case_on_the_wire_and_defaults_apply() -> None:
    workflow = documents.parse_workflow(
        (
            HEAD + "steps: [{id: a, kind: model, prompt: hi, maxTokens: 5, timeoutSeconds: 2}]"
        ).encode()
    )
    step = workflow.steps[0]
    assert isinstance(step, model.ModelStep)
    assert (step.max_tokens, step.timeout_seconds, step.retries, step.cache) == (5, 2.0, 0, True)


def test_a_cycle_is_a_load_error_naming_the_step_field_and_the_cycle() -> None:
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: transform, template: x, needs: [c]}
  - {id: b, kind: transform, template: x, needs: [a]}
  - {id: c, kind: transform, template: x, needs: [b]}
"""
    )
    assert found == ["steps[0](id=a).needs: cycle: a -> c -> b -> a"]


def test_unknown_needs_and_duplicate_ids_are_all_reported_at_once() -> None:
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: transform, template: x, needs: [ghost]}
  - {id: a, kind: transform, template: x}
  - {id: b, kind: transform, template: x, needs: [b]}
"""
    )
    assert found == [
        "steps[1](id=a).id: duplicate step id 'a' (first used by steps[0])",
        "steps[0](id=a).needs[0]: unknown step 'ghost'",
        "steps[2](id=b).needs[0]: step 'b' cannot need itself",
    ]


def test_field_errors_name_the_step_and_the_wire_field() -> None:
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: model, prompt: x, temperature: 9, maxTokenz: 3}
  - {id: b, kind: model, prompt: x, messages: [{role: user, content: y}]}
  - {id: c, kind: teleport}
"""
    )
    assert any(line.startswith("steps[0](id=a).temperature:") for line in found)
    assert any(line.startswith("steps[0](id=a).maxTokenz: Extra inputs") for line in found)
    assert any("steps[1](id=b)" in line and "exactly one of" in line for line in found)
    assert any(line.startswith("steps[2](id=c)") and "kind" in line for line in found)


def test_a_completion_step_continues_a_prompt_and_takes_no_messages() -> None:
    workflow = documents.parse_workflow(
        (
            HEAD
            + """steps: [{id: a, kind: model, mode: completion, prompt: "{{ inputs.q }}",
                        stop: ["\\n"], seed: 3}]"""
        ).encode()
    )
    step = workflow.steps[0]
    assert isinstance(step, model.ModelStep)
    assert (step.mode, step.stop, step.seed) == ("completion", ["\n"], 3)
    assert step.message_templates() == []  # it renders its prompt, not chat messages
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: model, mode: completion, messages: [{role: user, content: y}]}
  - {id: b, kind: model, mode: completion, prompt: x, messages: [{role: user, content: y}]}
  - {id: c, kind: model, mode: poem, prompt: x}
  - {id: d, kind: model, prompt: x, stop: [a, b, c, d, e]}
  - {id: e, kind: model, prompt: x, stop: [""]}
"""
    )
    for step_id in "ab":
        assert any(f"(id={step_id})" in line and "takes no `messages`" in line for line in found)
    for step_id, field in (("c", "mode"), ("d", "stop"), ("e", "stop[0]")):
        assert any(
            line.startswith(f"steps[{'cde'.index(step_id) + 2}](id={step_id}).{field}")
            for line in found
        ), (step_id, found)


def test_a_completion_prompt_is_a_template_checked_at_load() -> None:
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: transform, template: x}
  - {id: b, kind: model, mode: completion, prompt: "{{ steps.a.output }}"}
"""
    )
    assert found == [
        "steps[1](id=b).prompt: step 'a' is not in this step's `needs` (direct or indirect)"
    ]


def test_template_syntax_errors_surface_at_load_not_at_invoke() -> None:
    found = problems_of(HEAD + 'steps: [{id: a, kind: model, prompt: "{% if %}"}]')
    assert found[0].startswith("steps[0](id=a).prompt: template syntax error")
    found = problems_of(
        HEAD.replace("steps.a.output", "steps.a.output +")
        + "steps: [{id: a, kind: transform, template: x}]"
    )
    assert found[0].startswith("output: expression syntax error")


def test_templates_may_only_use_inputs_and_steps_they_need() -> None:
    found = problems_of(
        HEAD
        + """steps:
  - {id: a, kind: transform, template: "{{ secrets }} {{ steps.b.output }}"}
  - {id: b, kind: transform, template: "{{ steps['zz'].output }}"}
"""
    )
    assert found == [
        "steps[0](id=a).template: unknown name 'secrets' (templates see `inputs` and `steps`)",
        "steps[0](id=a).template: step 'b' is not in this step's `needs` (direct or indirect)",
        "steps[1](id=b).template: unknown step 'zz'",
    ]


def test_an_invalid_inputs_schema_is_a_load_error() -> None:
    found = problems_of(
        HEAD.replace("type: string", "type: strung")
        + "steps: [{id: a, kind: transform, template: x}]"
    )
    assert found[0].startswith("inputs.properties.q.type: not a valid JSON Schema")


def test_smoke_inputs_must_satisfy_the_inputs_schema() -> None:
    found = problems_of(
        HEAD
        + """steps: [{id: a, kind: transform, template: x}]
smoke: {inputs: {q: 3}, expect: {contains: x, jsonSchema: {type: 12}}}
"""
    )
    assert any(
        line.startswith("smoke.expect.jsonSchema.type: not a valid JSON Schema") for line in found
    )
    assert "smoke.inputs.q: 3 is not of type 'string'" in found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"a: [", "<document>: not valid YAML"),
        (b"- 1", "<document>: must be a mapping"),
        (b"apiVersion: v2\nkind: Workflow", "apiVersion: Input should be"),
    ],
)
def test_malformed_documents_are_spec_errors(text: bytes, expected: str) -> None:
    with pytest.raises(documents.SpecError, match=expected.replace("[", r"\[")):
        documents.parse_workflow(text)


def test_a_missing_file_is_a_spec_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(documents.SpecError, match=r"nope\.yaml: cannot read"):
        documents.load_workflow(tmp_path / "nope.yaml")
