"""Checking a workflow's output against its smoke expectations.

Pure and I/O-free so the runner, the deploy saga and tests all judge a smoke run the same
way: every given expectation is checked and every failure is reported.
"""

from __future__ import annotations

import json
from typing import Any

from plnt.workflowspec import jsonschemas, model


def as_text(output: Any) -> str:
    """The output as text: strings as they are, anything else as compact JSON."""
    if isinstance(output, str):
        return output
    return json.dumps(output, sort_keys=True, ensure_ascii=False)


def check(expect: model.Expectations, output: Any) -> list[str]:
    """Every expectation `output` fails, as human-readable sentences ([] means it passed)."""
    failures: list[str] = []
    if "equals" in expect.model_fields_set and output != expect.equals:
        failures.append(f"output {as_text(output)!r} does not equal {as_text(expect.equals)!r}")
    if expect.contains is not None and expect.contains not in as_text(output):
        failures.append(f"output does not contain {expect.contains!r}")
    if expect.json_schema is not None:
        for error in jsonschemas.validator(expect.json_schema).iter_errors(output):
            where = "".join(f"[{part!r}]" for part in error.absolute_path)
            failures.append(f"output{where}: {error.message}")
    return failures
