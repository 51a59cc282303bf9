"""The deploy saga end to end: real kubectl, real API server, real Temporal, real runners."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from plnt.client.clients import PlntClient
from plnt.processes.ports import free_port
from plnt.workflowspec import digests, sources
from tests.support.examples import EXAMPLE
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.registry import running_registry
from tests.support.stack import Stack, publish, runner_pids
from tests.support.statuses import condition_of, wait_for_phase


def invoke(stack: Stack, namespace: str, name: str, inputs: dict[str, Any]) -> Any:
    async def call() -> Any:
        client = PlntClient.from_kubeconfig(stack.server.kubeconfig)
        try:
            return await client.invoke(name, inputs, namespace=namespace)
        finally:
            await client.close()

    return asyncio.run(call())


def test_apply_becomes_ready_and_invoke_answers_through_kubectl(
    stack: Stack, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    ref, digest = stack.spec("ready")
    apply(kubectl, namespace, workflowrun("hello", ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/hello", "--timeout=60s")
    obj = kubectl.json("get", "-n", namespace, "wfr/hello")
    status = obj["status"]
    assert status["phase"] == "Ready"
    assert (status["revision"], status["digest"]) == (1, digest)
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert [(s["name"], s["state"]) for s in status["saga"]] == [
        ("pull", "Succeeded"),
        ("resolve", "Succeeded"),
        ("install", "Succeeded"),
        ("smoke", "Succeeded"),
        ("route", "Skipped"),  # no HTTPRoute asked for
        ("analyze", "Skipped"),  # a first deploy has no stable to compare with
        ("evaluate", "Skipped"),  # no spec.canary.evaluation
        ("promote", "Succeeded"),
    ]
    assert obj["metadata"]["finalizers"] == ["plnt.work/teardown"]
    pids = runner_pids(stack.state_dir, contains=obj["metadata"]["uid"])
    assert len(pids) == 1, (pids, status)

    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "etcd"}}))
    answer = json.loads(
        kubectl.run(
            "create",
            "--raw",
            f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/hello/invoke",
            "-f",
            str(body),
        ).stdout
    )
    assert answer["output"]["topic"] == "etcd"
    assert "etcd" in answer["output"]["pros"]

    described = kubectl.run("describe", "-n", namespace, "wfr/hello").stdout
    assert "Promoted" in described and "smoke passed" in described


def test_digest_mismatch_fails_naming_both_digests_and_deploys_nothing(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    ref, digest = stack.spec("mismatch", version="9.9.9")
    wrong = "sha256:" + "0" * 64
    apply(kubectl, namespace, workflowrun("bad", ref, wrong))

    obj = wait_for_phase(kubectl, namespace, "bad", "Failed")
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ready["reason"] == "DigestMismatch"
    assert wrong in ready["message"] and digest in ready["message"]
    pull = obj["status"]["saga"][0]
    assert (pull["name"], pull["state"], pull["attempts"]) == ("pull", "Failed", 1)
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == set()
    assert "revision" not in obj["status"]


def test_the_example_run_deploys_from_the_embedded_layout_and_answers(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    run = yaml.safe_load((examples / "fanout-run.yaml").read_text())
    spec_file = examples / "fanout.workflow.yaml"
    assert run["spec"]["workflow"]["digest"] == digests.compute(spec_file.read_bytes())
    # What `make up` does before starting the server:
    publish(stack.state_dir / "layouts" / "examples", "fanout", spec_file.read_text())

    kubectl.run(
        "apply",
        "-n",
        namespace,
        "-f",
        str(examples / "plntbackend.yaml"),
        "-f",
        str(examples / "fanout-run.yaml"),
    )
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/fanout", "--timeout=90s")
    answer = json.loads(
        kubectl.run(
            "create",
            "--raw",
            f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/fanout/invoke",
            "-f",
            str(examples / "fanout-input.json"),
        ).stdout
    )
    assert answer["output"]["topic"] == "etcd"
    assert "operators" in answer["output"]["cons"]
    saga = kubectl.json("get", "-n", namespace, "wfr/fanout")["status"]["saga"]
    analyze = next(step for step in saga if step["name"] == "analyze")
    assert analyze["state"] == "Succeeded"
    assert "20 requests" in analyze["message"]
    resolve = next(step for step in saga if step["name"] == "resolve")
    # examples/plntbackend.yaml declares 32; echo reports no load, so all of it is free.
    assert resolve["message"] == "backend echo: echo, model echo-1, headroom 32"


def test_the_kubernetes_target_is_refused_by_the_saga_with_a_reason(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    ref, digest = stack.spec("ready")
    applied = apply(kubectl, namespace, workflowrun("k8s", ref, digest, target="kubernetes"))
    assert "kubernetes runners need plnt installed in a cluster" in applied.stderr

    obj = wait_for_phase(kubectl, namespace, "k8s", "Failed")
    ready = condition_of(obj, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == (
        "False",
        "TargetUnavailable",
    )
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == set()


def test_an_unreachable_named_backend_fails_the_deploy_naming_the_probe(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    apply(kubectl, namespace, backend_manifest("down", "openai", endpoint=closed))
    ref, digest = stack.spec("ready")
    apply(kubectl, namespace, workflowrun("needs-down", ref, digest, backend={"name": "down"}))

    obj = wait_for_phase(kubectl, namespace, "needs-down", "Failed")
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["reason"] == "BackendUnavailable"
    assert 'PlntBackend "down" is unreachable' in ready["message"]
    assert f"{closed}/models" in ready["message"]
    backend = kubectl.json("get", "-n", namespace, "plntbackend/down")
    assert backend["status"]["reachable"] is False
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == set()


def test_placement_by_selector_skips_a_bigger_backend_that_does_not_answer(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    big = backend_manifest(
        "big", "openai", endpoint=closed, labels={"pool": "a"}, capacity={"maxConcurrency": 64}
    )
    small = backend_manifest(
        "small", "echo", endpoint=None, labels={"pool": "a"}, capacity={"maxConcurrency": 2}
    )
    other = backend_manifest(
        "other", "echo", endpoint=None, labels={"pool": "b"}, capacity={"maxConcurrency": 99}
    )
    apply(kubectl, namespace, "---\n".join([big, small, other]))
    ref, digest = stack.spec("ready")
    selection = {"selector": {"matchLabels": {"pool": "a"}}}
    apply(kubectl, namespace, workflowrun("placed", ref, digest, backend=selection))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/placed", "--timeout=60s")
    obj = kubectl.json("get", "-n", namespace, "wfr/placed")
    assert obj["status"]["backend"] == "small"
    resolve = next(step for step in obj["status"]["saga"] if step["name"] == "resolve")
    assert resolve["message"].startswith("backend small: echo")


def test_kubectl_wait_for_ready_after_a_spec_change_waits_for_the_new_revision(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    first_ref, first_digest = stack.spec("wait-a", version="3.0.0")
    second_ref, second_digest = stack.spec("wait-b", version="3.1.0")
    apply(kubectl, namespace, workflowrun("w", first_ref, first_digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/w", "--timeout=60s")
    # Ready is already True (revision 1 serves), but its observedGeneration is 1: kubectl
    # only accepts it once the condition speaks for generation 2.
    apply(kubectl, namespace, workflowrun("w", second_ref, second_digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/w", "--timeout=60s")
    obj = kubectl.json("get", "-n", namespace, "wfr/w")
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["observedGeneration"] == obj["metadata"]["generation"] == 2
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (2, second_digest)


def test_a_registry_that_is_down_fails_the_pull_and_the_saga_retries_until_it_serves(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    port = free_port()  # the registry will listen here, but not yet
    text = EXAMPLE.read_text().replace("version: 1.0.0", "version: 7.0.0")
    digest = str(digests.compute(text.encode()))
    ref = f"oci://127.0.0.1:{port}/workflows/late:1"
    apply(kubectl, namespace, workflowrun("late", ref, digest))

    obj = wait_for_phase(kubectl, namespace, "late", "Failed")
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["reason"] == "PullFailed"
    assert ready["message"].endswith("retrying in 10 s"), ready["message"]

    with running_registry(port=port):
        asyncio.run(sources.publish(text.encode(), ref))
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/late", "--timeout=90s")
        obj = kubectl.json("get", "-n", namespace, "wfr/late")
        assert (obj["status"]["digest"], obj["status"]["phase"]) == (digest, "Ready")
        assert condition_of(obj, "Ready")["reason"] == "Promoted"  # type: ignore[index]
