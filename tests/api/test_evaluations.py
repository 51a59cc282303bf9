"""`spec.canary.evaluation` at admission: every bad field is refused with its path."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from plnt.api import evaluations as ev
from plnt.api.workflowruns import WorkflowRun, WorkflowRunSpec
from plnt.registry import fieldcauses
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy

DIGEST = "sha256:" + "0" * 64


def causes(evaluation: dict[str, Any]) -> list[tuple[str, str]]:
    spec = {"workflow": {"ref": "oci-layout:x:y", "digest": DIGEST}}
    spec["canary"] = {"evaluation": evaluation}
    try:
        WorkflowRunSpec.model_validate(spec, strict=True)
    except pydantic.ValidationError as error:
        return [(c.field, c.message) for c in fieldcauses.validation_causes(error, root="spec")]
    return []


E = "spec.canary.evaluation"
JUDGE = {"backend": "j", "rubric": "r"}


def test_a_valid_evaluation_with_every_scorer_is_accepted() -> None:
    assert (
        causes(
            {
                "cases": [
                    {
                        "name": "count",
                        "inputs": {"prefix": "1, 2,"},
                        "expect": [
                            {"contains": "3"},
                            {"regex": r"^\s*3", "name": "starts"},
                            {"equals": None, "path": "/missing"},
                            {"jsonSchema": {"type": "string"}},
                            {"judge": {"backend": "judge", "rubric": "more numbers win"}},
                        ],
                    }
                ],
                "dataset": {"ref": "oci-layout:evals:v1", "digest": DIGEST},
                "minPassRate": 0.9,
                "maxRegression": 0.05,
                "limits": {"starts": {"minPassRate": 1}},
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("evaluation", "field", "says"),
    [
        ({}, E, "give cases, a dataset, or both"),
        ({"cases": []}, E, "give cases, a dataset, or both"),
        (
            {"cases": [{"name": "a", "expect": [{"contains": "x", "regex": "y"}]}]},
            f"{E}.cases[0].expect[0]",
            "exactly one of contains, regex, jsonSchema, equals, judge, trajectory"
            " (found: contains, regex)",
        ),
        (
            {"cases": [{"name": "a", "expect": [{}]}]},
            f"{E}.cases[0].expect[0]",
            "(found: none)",
        ),
        (
            {"cases": [{"name": "a", "expect": [{"regex": "("}]}]},
            f"{E}.cases[0].expect[0].regex",
            "missing ), unterminated subpattern",
        ),
        (
            {"cases": [{"name": "a", "expect": [{"jsonSchema": {"type": "nope"}}]}]},
            f"{E}.cases[0].expect[0].jsonSchema",
            "not a JSON Schema",
        ),
        (
            {"cases": [{"name": "a", "expect": [{"contains": "x", "path": "a/b"}]}]},
            f"{E}.cases[0].expect[0].path",
            "not a JSON Pointer",
        ),
        (
            {"cases": [{"name": "a"}, {"name": "a"}]},
            f"{E}.cases",
            'duplicate case name "a"',
        ),
        ({"cases": [{"name": "a"}], "minPassRate": 1.5}, f"{E}.minPassRate", "less than or equal"),
        (
            {"cases": [{"name": "a"}], "dataset": {"ref": "x", "digest": "sha256:abc"}},
            f"{E}.dataset.digest",
            "must match",
        ),
        (
            {"cases": [{"name": "a", "expect": [{"judge": {"backend": "j"}}]}]},
            f"{E}.cases[0].expect[0].judge.rubric",
            "Required value",
        ),
        (
            {"cases": [{"name": "a", "expect": [{"judge": JUDGE, "path": "/a"}]}]},
            f"{E}.cases[0].expect[0]",
            "a judge reads the whole answer",
        ),
    ],
)
def test_a_bad_evaluation_is_refused_naming_the_field(
    evaluation: dict[str, Any], field: str, says: str
) -> None:
    found = causes(evaluation)
    assert any(path == field and says in message for path, message in found), found


def test_a_scorers_key_is_its_name_or_else_its_type() -> None:
    assert ev.Scorer.model_validate({"jsonSchema": {}}).key == "jsonSchema"
    assert ev.Scorer.model_validate({"equals": None}).type == "equals"  # null is a value
    assert ev.Scorer.model_validate({"contains": "x", "name": "has-x"}).key == "has-x"


def test_a_dataset_reference_no_source_understands_is_refused_at_admission() -> None:

    strategy = WorkflowRunStrategy(model=WorkflowRun)
    dataset = {"ref": "ftp://nowhere/evals", "digest": DIGEST}
    obj = {
        "spec": {
            "workflow": {"ref": "oci-layout:x:y", "digest": DIGEST},
            "canary": {"evaluation": {"dataset": dataset}},
        }
    }
    (cause,) = strategy.validate_semantics(obj)
    assert cause.field == "spec.canary.evaluation.dataset.ref"
    assert cause.message.startswith('Invalid value: "ftp://nowhere/evals"')
