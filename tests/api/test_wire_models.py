"""Wire models: camelCase on the wire, snake_case in Python, unknown fields refused, lossless."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from plnt.api import backends, meta, workflowruns

DIGEST = "sha256:" + "ab" * 32


def workflowrun_wire() -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {
            "name": "summarize",
            "namespace": "team-a",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2030-01-01T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1"}
            ],
        },
        "spec": {
            "workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST},
            "backend": {"name": "echo", "model": "m"},
            "gpuClass": "l4",
            "replicas": 2,
            "canary": {"weight": 25, "pauseSeconds": 30, "analysis": {"maxP95Milliseconds": 900}},
            "cache": {"ttlSeconds": 60},
        },
        "status": {
            "phase": "Ready",
            "observedGeneration": 3,
            "readyReplicas": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Promoted",
                    "message": "revision 1 serves",
                    "lastTransitionTime": "2030-01-01T00:00:05Z",
                    "observedGeneration": 3,
                }
            ],
            "history": [{"revision": 1, "digest": DIGEST, "promotedAt": "2030-01-01T00:00:05Z"}],
            "traffic": [{"revision": 1, "digest": DIGEST, "weight": 100}],
            "saga": [{"name": "pull", "state": "Succeeded", "attempts": 1, "startTime": "x"}],
            "lastBench": {
                "id": "bench-1",
                "phase": "Succeeded",
                "targets": [{"label": "stable", "revision": 1}],
                "results": [{"label": "stable", "requests": 10, "errorRate": 0.0}],
                "restarts": 0,
                "message": "stable (revision 1): 10 requests",
            },
        },
    }


def test_a_workflowrun_round_trips_through_the_model_unchanged_apart_from_defaults() -> None:
    wire = workflowrun_wire()
    run = workflowruns.WorkflowRun.model_validate(wire)
    again = run.to_wire()
    assert workflowruns.WorkflowRun.model_validate(again) == run
    assert again["metadata"] == wire["metadata"]
    assert again["status"]["lastBench"] == wire["status"]["lastBench"]
    assert again["spec"]["canary"]["pauseSeconds"] == 30
    # Defaults the model fills in are written out, camelCase too.
    assert again["spec"]["cache"] == {"enabled": True, "ttlSeconds": 60, "maxEntries": 1024}
    assert again["spec"]["target"] == "local"


def test_python_names_are_snake_case_and_wire_names_are_camel_case() -> None:
    run = workflowruns.WorkflowRun.model_validate(workflowrun_wire())
    assert run.metadata.resource_version == "42"
    assert run.spec.gpu_class == "l4"
    assert run.status is not None and run.status.ready_replicas == 2
    assert run.metadata.owner_references is not None
    assert run.metadata.owner_references[0].api_version == "v1"


def test_a_model_may_be_built_by_python_names_and_serialises_by_wire_names() -> None:
    built = meta.ObjectMeta(name="x", resource_version="7", generate_name="x-")
    assert built.to_wire() == {"name": "x", "resourceVersion": "7", "generateName": "x-"}


def test_unset_optional_fields_are_left_out_of_the_wire_form() -> None:
    assert meta.ObjectMeta().to_wire() == {}
    assert meta.ListMeta(resource_version="5").to_wire() == {"resourceVersion": "5"}


def test_list_metas_continue_token_uses_the_reserved_word_on_the_wire() -> None:
    parsed = meta.ListMeta.model_validate({"continue": "abc", "remainingItemCount": 3})
    assert (parsed.continue_, parsed.remaining_item_count) == ("abc", 3)
    assert parsed.to_wire() == {"continue": "abc", "remainingItemCount": 3}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "unknownField"), 1),
        (("metadata", "nmae"), "typo"),
        (("spec", "canary", "weigth"), 5),
    ],
)
def test_an_unknown_field_is_refused_and_named(path: tuple[str, ...], value: Any) -> None:
    wire = workflowrun_wire()
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError) as refused:
        workflowruns.WorkflowRun.model_validate(wire)
    assert path[-1] in str(refused.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("spec", "workflow", "digest"), "sha256:ABC"),
        (("spec", "workflow", "ref"), ""),
        (("spec", "replicas"), -1),
        (("spec", "replicas"), 1001),
        (("spec", "canary", "weight"), 101),
        (("spec", "canary", "pauseSeconds"), 86401),
        (("spec", "target"), "mars"),
        (("status", "phase"), "Sleeping"),
    ],
)
def test_a_value_outside_its_documented_range_is_refused(
    field: tuple[str, ...], value: Any
) -> None:
    wire = workflowrun_wire()
    target = wire
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    with pytest.raises(ValidationError):
        workflowruns.WorkflowRun.model_validate(wire)


def test_the_kind_and_api_version_of_a_workflowrun_are_fixed() -> None:
    run = workflowruns.WorkflowRun.model_validate(
        {"spec": {"workflow": {"ref": "oci://r/wf:1", "digest": DIGEST}}}
    )
    assert (run.to_wire()["apiVersion"], run.to_wire()["kind"]) == (
        workflowruns.API_VERSION,
        workflowruns.KIND,
    )
    with pytest.raises(ValidationError):
        workflowruns.WorkflowRun.model_validate({**run.to_wire(), "kind": "Deployment"})


def test_a_rollback_body_names_its_revision_in_camel_case_and_refuses_zero() -> None:
    body = workflowruns.WorkflowRunRollback.model_validate({"toRevision": 2})
    assert body.to_wire() == {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRunRollback",
        "toRevision": 2,
    }
    with pytest.raises(ValidationError):
        workflowruns.WorkflowRunRollback.model_validate({"toRevision": 0})


def test_a_backend_keeps_its_credentials_by_reference_with_token_as_the_default_key() -> None:
    backend = backends.PlntBackend.model_validate(
        {
            "metadata": {"name": "gpu"},
            "spec": {"type": "vllm", "credentialsRef": {"name": "api"}, "capacity": {}},
        }
    )
    wire = backend.to_wire()
    assert wire["spec"]["credentialsRef"] == {"name": "api", "key": "token"}
    assert wire["spec"]["capacity"] == {"maxConcurrency": 16, "gpus": 0}
    with pytest.raises(ValidationError):
        backends.PlntBackend.model_validate({"spec": {"type": "tpu-farm"}})
    with pytest.raises(ValidationError):
        backends.PlntBackend.model_validate(
            {"spec": {"type": "echo", "capacity": {"maxConcurrency": 0}}}
        )


def test_a_condition_has_the_shape_kubectl_wait_reads() -> None:
    condition = meta.Condition(type="Ready", status="True", last_transition_time="t")
    assert condition.to_wire() == {
        "type": "Ready",
        "status": "True",
        "lastTransitionTime": "t",
        "reason": "",
        "message": "",
    }
    with pytest.raises(ValidationError):
        meta.Condition.model_validate({"type": "Ready", "status": "Yes"})
