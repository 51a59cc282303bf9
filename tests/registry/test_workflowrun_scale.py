"""The Scale of a WorkflowRun and the run a Scale write produces (pure mapping)."""

from __future__ import annotations

from typing import Any

import pytest

from plnt.api import errors
from plnt.registry.workflowruns import scale


def run(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "r", "namespace": "default", "uid": "u", "resourceVersion": "9"},
        "spec": {"replicas": 3, "workflow": {"ref": "oci://r.example/wf:1"}},
        "status": status,
    }


def test_a_scale_shows_desired_and_current_replicas_and_the_selector() -> None:
    shown = scale.to_scale(run(replicas=2, selector="run=r"))
    assert shown == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": "r", "namespace": "default", "uid": "u", "resourceVersion": "9"},
        "spec": {"replicas": 3},
        "status": {"replicas": 2, "selector": "run=r"},
    }


def test_a_run_without_replicas_scales_as_one_with_none_running() -> None:
    obj = run()
    del obj["spec"]["replicas"]
    assert scale.to_scale(obj)["spec"] == {"replicas": 1}
    assert scale.to_scale(obj)["status"] == {"replicas": 0}


def test_a_scale_write_changes_only_spec_replicas_and_carries_its_resource_version() -> None:
    old = run(replicas=2)
    new = scale.scaled(
        old, {"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 0}}, name="r"
    )
    assert new["spec"] == {"replicas": 0, "workflow": {"ref": "oci://r.example/wf:1"}}
    assert new["status"] == old["status"]
    assert new["metadata"]["resourceVersion"] == "7"
    assert old["spec"]["replicas"] == 3


@pytest.mark.parametrize("replicas", [-1, "2", True, None])
def test_replicas_that_are_not_a_non_negative_integer_are_invalid(replicas: object) -> None:
    with pytest.raises(errors.Invalid) as raised:
        scale.scaled(run(), {"spec": {"replicas": replicas}}, name="r")
    assert [c.field for c in raised.value.causes] == ["spec.replicas"]
    assert raised.value.kind == "Scale"
