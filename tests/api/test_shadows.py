"""`spec.canary.shadow` at admission: its limits named by field; it needs an evaluation."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from plnt.api import shadows
from plnt.api.workflowruns import WorkflowRun, WorkflowRunSpec
from plnt.registry import fieldcauses
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy

DIGEST = "sha256:" + "0" * 64
S = "spec.canary.shadow"
EVALUATION = {"cases": [{"name": "one", "inputs": {}, "expect": [{"contains": "x"}]}]}


def spec(shadow: Any, *, evaluation: Any = EVALUATION) -> dict[str, Any]:
    canary: dict[str, Any] = {"shadow": shadow}
    if evaluation is not None:
        canary["evaluation"] = evaluation
    return {"workflow": {"ref": "oci-layout:x:y", "digest": DIGEST}, "canary": canary}


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        WorkflowRunSpec.model_validate(body, strict=True)
    except pydantic.ValidationError as error:
        return [(c.field, c.message) for c in fieldcauses.validation_causes(error, root="spec")]
    obj = {"apiVersion": "plnt.work/v1", "kind": "WorkflowRun", "metadata": {}, "spec": body}
    found = WorkflowRunStrategy(model=WorkflowRun).validate_semantics(obj)
    return [(c.field, c.message) for c in found]


def test_a_shadow_takes_its_defaults_and_is_accepted_beside_an_evaluation() -> None:
    assert causes(spec({"percent": 50})) == []
    parsed = WorkflowRunSpec.model_validate(spec({"percent": 50}))
    assert parsed.canary is not None and parsed.canary.shadow is not None
    shadow = parsed.canary.shadow
    assert (shadow.min_comparisons, shadow.timeout_seconds, shadow.queue_size) == (
        shadows.DEFAULT_MIN_COMPARISONS,
        shadows.DEFAULT_TIMEOUT_SECONDS,
        shadows.DEFAULT_QUEUE_SIZE,
    )
    assert shadow.expect is None


@pytest.mark.parametrize(
    ("shadow", "field"),
    [
        ({"percent": 0}, "spec.canary.shadow.percent"),
        ({"percent": 101}, "spec.canary.shadow.percent"),
        ({}, "spec.canary.shadow.percent"),
        ({"percent": 5, "minComparisons": 0}, "spec.canary.shadow.minComparisons"),
        ({"percent": 5, "timeoutSeconds": 0}, "spec.canary.shadow.timeoutSeconds"),
        ({"percent": 5, "timeoutSeconds": 1801}, "spec.canary.shadow.timeoutSeconds"),
        ({"percent": 5, "queueSize": 0}, "spec.canary.shadow.queueSize"),
        ({"percent": 5, "expect": [{"contains": "a", "regex": "b"}]}, f"{S}.expect[0]"),
        ({"percent": 5, "sample": 3}, "spec.canary.shadow.sample"),
    ],
)
def test_a_bad_shadow_is_refused_naming_its_field(shadow: dict[str, Any], field: str) -> None:
    found = causes(spec(shadow))
    assert [f for f, _ in found] == [field], found


def test_a_shadow_without_an_evaluation_is_refused_naming_spec_canary_shadow() -> None:
    found = causes(spec({"percent": 10}, evaluation=None))
    assert [f for f, _ in found] == ["spec.canary.shadow"]
    assert "needs spec.canary.evaluation" in found[0][1]
