"""Deploys of workflows that call pinned workflows: the pull fetches the tree, the
revision's runners get it and answer, and a tree that is not what was pinned fails the
pull for good, naming the step. Real kubectl, API server, Temporal, runners, OCI layout
and registry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from plnt.workflowspec import sources
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.registry import running_registry
from tests.support.stack import Stack, publish, runner_pids
from tests.support.statuses import condition_of, wait_for_phase
from tests.support.subworkflows import caller, child, digest_of


def invoke_raw(kubectl: Kubectl, namespace: str, name: str, body: Path) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(
        kubectl.run(
            "create",
            "--raw",
            f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{name}/invoke",
            "-f",
            str(body),
        ).stdout
    )
    return answer


def test_a_run_calling_a_pinned_workflow_from_the_layout_deploys_and_answers_through_it(
    stack: Stack, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    leaf = child("1.1.0")
    leaf_ref, leaf_digest = publish(stack.layout, "shout-layout", leaf)
    assert leaf_digest == digest_of(leaf)
    ref, digest = publish(stack.layout, "caller-layout", caller(leaf_ref, leaf_digest))
    apply(kubectl, namespace, workflowrun("calls", ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/calls", "--timeout=90s")
    obj = kubectl.json("get", "-n", namespace, "wfr/calls")
    assert (obj["status"]["digest"], obj["status"]["phase"]) == (digest, "Ready")
    smoke = next(step for step in obj["status"]["saga"] if step["name"] == "smoke")
    assert smoke["state"] == "Succeeded"  # the smoke case goes through the called workflow

    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "etcd"}}))
    answer = invoke_raw(kubectl, namespace, "calls", body)
    assert answer["output"] == {"called": "SHOUT ETCD!", "topic": "etcd"}
    call = next(step for step in answer["trace"] if step["id"] == "call")
    assert [step["id"] for step in call["steps"]] == ["say", "loud"]


def test_a_run_calling_a_pinned_workflow_from_the_registry_deploys_and_answers(
    stack: Stack, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    leaf = child("1.2.0")
    with running_registry() as registry:
        leaf_ref = f"oci://{registry.host}/workflows/shout:1"
        asyncio.run(sources.publish(leaf.encode(), leaf_ref))
        top = caller(leaf_ref, digest_of(leaf), name="remote")
        top_ref = f"oci://{registry.host}/workflows/remote:1"
        asyncio.run(sources.publish(top.encode(), top_ref))
        apply(kubectl, namespace, workflowrun("remote", top_ref, digest_of(top)))
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/remote", "--timeout=90s")
    # The registry is gone: the revision's runners hold the tree they were given.
    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "oci"}}))
    answer = invoke_raw(kubectl, namespace, "remote", body)
    assert answer["output"] == {"called": "SHOUT OCI!", "topic": "oci"}


def test_a_called_workflow_that_is_not_its_pinned_digest_fails_the_pull_naming_the_step(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    leaf_ref, published = publish(stack.layout, "shout-moved", child("1.3.0"))
    pinned = digest_of(child("1.4.0"))  # the tag now holds other bytes
    ref, digest = publish(stack.layout, "caller-moved", caller(leaf_ref, pinned, name="moved"))
    apply(kubectl, namespace, workflowrun("moved", ref, digest))

    obj = wait_for_phase(kubectl, namespace, "moved", "Failed")
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["reason"] == "DigestMismatch"
    assert "steps[1](id=call)" in ready["message"]
    assert pinned in ready["message"] and published in ready["message"]
    pull = obj["status"]["saga"][0]
    assert (pull["name"], pull["state"], pull["attempts"]) == ("pull", "Failed", 1)
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == set()
