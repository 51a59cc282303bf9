"""The published JSON Schema stays in sync with the model and accepts the examples."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from plnt.workflowspec import schema

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_schema_file_matches_the_model() -> None:
    committed = (REPO / "docs/spec/workflow.schema.json").read_text()
    assert committed == schema.render(), "run: python -m plnt.workflowspec.schema"


@pytest.mark.parametrize(
    "name", sorted(path.name for path in (REPO / "examples").glob("*.workflow.yaml"))
)
def test_the_examples_validate_against_the_published_schema(name: str) -> None:
    published = json.loads((REPO / "docs/spec/workflow.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(published)
    jsonschema.validate(yaml.safe_load((REPO / "examples" / name).read_text()), published)


def test_the_published_schema_refuses_unknown_fields() -> None:
    published = json.loads((REPO / "docs/spec/workflow.schema.json").read_text())
    document = yaml.safe_load((REPO / "examples/chat.workflow.yaml").read_text())
    document["steps"][0]["maxTokenz"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, published)
