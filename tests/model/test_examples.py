"""The completion example's WorkflowRun pins the example spec and names the model's backend."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from plnt.workflowspec import digests, documents
from tests.support.model import PIN

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_example_run_pins_the_example_specs_bytes_on_the_models_backend() -> None:
    spec = EXAMPLES / "complete.workflow.yaml"
    run = yaml.safe_load((EXAMPLES / "complete-run.yaml").read_text())
    assert run["spec"]["workflow"]["digest"] == digests.compute(spec.read_bytes())
    assert run["spec"]["workflow"]["ref"] == "oci-layout:examples:complete"  # as make up pushes
    assert run["spec"]["backend"]["name"] == PIN.name


def test_the_example_inputs_satisfy_the_example_spec() -> None:
    workflow = documents.load_workflow(EXAMPLES / "complete.workflow.yaml")
    single = json.loads((EXAMPLES / "complete-input.json").read_text())["inputs"]
    many = json.loads((EXAMPLES / "complete-inputs.json").read_text())
    assert len({entry["prefix"] for entry in many}) == len(many)  # distinct: no cache hits
    for inputs in [single, *many]:
        assert list(documents.validate_inputs(workflow, inputs)) == []
