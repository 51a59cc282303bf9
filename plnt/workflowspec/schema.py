"""The published JSON Schema of the workflow spec, generated from the pydantic model.

`python -m plnt.workflowspec.schema [PATH]` rewrites `docs/spec/workflow.schema.json`; a
test fails when the committed file and the model disagree, so the two never drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from plnt.workflowspec import model

SCHEMA_ID = "https://plnt.work/schemas/microagents/v1/workflow.schema.json"
DEFAULT_PATH = Path("docs/spec/workflow.schema.json")


def workflow_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a workflow document, by wire (camelCase) names."""
    schema = model.Workflow.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "Workflow (microagents.plnt.work/v1)",
    }


def render() -> str:
    """The schema file's exact text."""
    return json.dumps(workflow_json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Write the schema to the given path (default: docs/spec/workflow.schema.json)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    main()
