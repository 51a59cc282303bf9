"""Admission's one pydantic pass: the canonical body comes from the validation that judged it.

What it must equal is what two passes made before (validate strictly, then validate again
and dump): the same defaults, the same nulls dropped, the same key order, so objects
stored before read back and re-store to the same bytes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from plnt.registry import admitting, workflowruns
from plnt.registry.definitions import Object
from plnt.registry.storedobjects import encode
from plnt.registry.strategy import Strategy

DIGEST = "sha256:" + "cd" * 32


def run(**spec: Any) -> Object:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}, **spec},
    }


def two_passes(strategy: Strategy, obj: Object) -> Object:
    """What canonicalisation stored before: a second validation of the body, dumped."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    wire = strategy.model.model_validate(body).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    out = copy.deepcopy(obj)
    for key in list(out):
        if key not in ("metadata", "apiVersion", "kind") and key not in wire:
            del out[key]
    for key, value in wire.items():
        if key not in ("metadata", "apiVersion", "kind"):
            out[key] = value
    return out


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"replicas": 3, "canary": None},
        {"replicas": 3.0},  # an integral float is an integer, as it is to kube
        {"backend": {"name": "gpu-a"}, "target": "local"},
    ],
    ids=["defaults", "nulls-dropped", "integral-float", "backend"],
)
def test_the_canonical_body_is_what_two_passes_made_byte_for_byte(spec: dict[str, Any]) -> None:
    strategy = workflowruns.DEFINITION.strategy
    obj = run(**spec)
    expected = two_passes(strategy, obj)
    checked = strategy.check(obj)
    assert checked.causes == []
    assert checked.canonical is not None
    strategy.canonicalize(obj, checked.canonical)
    assert encode(obj) == encode(expected)
    assert json.dumps(obj) == json.dumps(expected)  # the key order too


def test_a_body_with_errors_has_its_causes_and_no_canonical_body() -> None:
    strategy = workflowruns.DEFINITION.strategy
    checked = strategy.check(run(replicas="3"))
    assert checked.canonical is None
    assert [c.field for c in checked.causes] == ["spec.replicas"]


def test_admission_validates_a_body_once(monkeypatch: pytest.MonkeyPatch) -> None:
    model = workflowruns.DEFINITION.model
    calls: list[bool] = []
    validate = model.model_validate

    def counting(obj: Any, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("strict")))
        return validate(obj, **kwargs)

    monkeypatch.setattr(model, "model_validate", counting)
    obj = run(replicas=2)
    warnings = admitting.validate(workflowruns.DEFINITION, obj, None)
    assert warnings == []
    assert calls == [True]
    assert obj["spec"]["replicas"] == 2
