"""`spec.target: kubernetes` through the kube-apiserver stand-in and its kubelet simulator.

The worker installs each revision as a Helm release of `charts/workflow-runner` (the
Helm SDK, talking to the stand-in), waits for the Deployment to roll out, and reads the
runner endpoints from EndpointSlices; the simulated kubelet runs each pod as a real
`plnt runner` process. The same WorkflowRun YAML as standalone, with one field changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import Cluster, published, run_manifest
from tests.support.plnt_server import Kubectl, wait_for

CHART = Path(__file__).resolve().parents[2] / "charts" / "workflow-runner"


def status_of(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    obj = json.loads(kubectl.run("get", "-n", namespace, "wfr", name, "-o", "json").stdout)
    return dict(obj.get("status") or {})


def objects(admin: Kubectl, namespace: str, uid: str) -> list[str]:
    """The run's workload objects in the cluster, as `kind/name`."""
    kinds = "deployments,services,configmaps,poddisruptionbudgets,pods"
    out = admin.run(
        "get", kinds, "-n", namespace, "-l", f"plnt.work/run-uid={uid}", "-o", "name"
    ).stdout
    return sorted(line for line in out.splitlines() if line)


def test_a_kubernetes_run_becomes_ready_invokes_scales_and_leaves_nothing_when_deleted(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl, tmp_path: Path
) -> None:
    ref, digest = published(cluster, "31")
    manifest = run_manifest("kube", ref, digest)
    manifest["spec"]["target"] = "kubernetes"
    applied = user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
    assert "Warning" not in applied.stderr  # standalone's "needs a cluster" is not said here
    user.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/kube", "--timeout=150s")

    status = status_of(user, namespace, "kube")
    assert (status["phase"], status["revision"], status["readyReplicas"]) == ("Ready", 1, 1)
    uid = json.loads(user.run("get", "-n", namespace, "wfr", "kube", "-o", "json").stdout)[
        "metadata"
    ]["uid"]
    made = objects(admin, namespace, uid)
    assert "deployment.apps/kube-r1" in made and "service/kube-r1" in made
    releases = admin.run("get", "secrets", "-n", namespace, "-l", "owner=helm", "-o", "name")
    assert "secret/sh.helm.release.v1.kube-r1.v1" in releases.stdout.split()
    assert len([name for name in made if name.startswith("pod/")]) == 1

    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "clusters"}}))
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/kube/invoke"
    answer = json.loads(user.run("create", "--raw", path, "-f", str(body)).stdout)
    assert "clusters" in json.dumps(answer["output"])

    user.run("scale", "-n", namespace, "wfr/kube", "--replicas=3")
    wait_for(
        lambda: status_of(user, namespace, "kube").get("readyReplicas") == 3,
        timeout=120,
        message="3 ready replicas",
    )
    assert len([n for n in objects(admin, namespace, uid) if n.startswith("pod/")]) == 3
    assert len(status_of(user, namespace, "kube")["traffic"][0]["endpoints"]) == 3

    user.run("delete", "-n", namespace, "wfr/kube", "--timeout=120s")
    wait_for(lambda: objects(admin, namespace, uid) == [], timeout=60, message="nothing left")
    left = admin.run("get", "secrets", "-n", namespace, "-l", "owner=helm", "-o", "name")
    assert left.stdout.strip() == ""


def gpu_backend(namespace: str, gpu_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": f"echo-{gpu_class}", "namespace": namespace},
        "spec": {"type": "echo", "gpuClass": gpu_class, "models": ["echo-1"]},
    }


def test_a_gpu_class_no_pool_can_hold_fails_before_anything_is_installed(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl
) -> None:
    user.run("apply", "-f", "-", input=yaml.safe_dump(gpu_backend(namespace, "a100x2")))
    ref, digest = published(cluster, "32")
    manifest = run_manifest("big", ref, digest)
    manifest["spec"].update(target="kubernetes", gpuClass="a100x2")
    user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))

    def refused() -> dict[str, Any] | None:
        status = status_of(user, namespace, "big")
        ready = {c["type"]: c for c in status.get("conditions") or []}.get("Ready")
        return ready if ready and ready["reason"] == "InsufficientCapacity" else None

    ready = wait_for(refused, timeout=90, message="Ready False, InsufficientCapacity")
    assert ready["status"] == "False"
    message = ready["message"]
    assert message.startswith(
        "gpu class 'a100x2' needs cpu: 100m, memory: 128Mi, nvidia.com/gpu: 2"
    )
    assert "the best pool 'gpu' fits 0 (free " in message and "nvidia.com/gpu: 1)" in message
    uid = json.loads(user.run("get", "-n", namespace, "wfr", "big", "-o", "json").stdout)[
        "metadata"
    ]["uid"]
    assert objects(admin, namespace, uid) == []
    user.run("delete", "-n", namespace, "wfr/big", "--timeout=120s")


def test_a_gpu_class_the_gpu_pool_holds_runs_its_pod_on_the_gpu_node(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl
) -> None:
    user.run("apply", "-f", "-", input=yaml.safe_dump(gpu_backend(namespace, "t4")))
    ref, digest = published(cluster, "33")
    manifest = run_manifest("small", ref, digest)
    manifest["spec"].update(target="kubernetes", gpuClass="t4")
    user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
    user.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/small", "--timeout=150s")
    pods = json.loads(
        admin.run("get", "pods", "-n", namespace, "-l", "app.kubernetes.io/instance=small-r1",
                  "-o", "json").stdout
    )["items"]  # fmt: skip
    assert [pod["spec"]["nodeName"] for pod in pods] == ["gpu-1"]
    user.run("delete", "-n", namespace, "wfr/small", "--timeout=120s")


def test_a_second_revision_canaries_and_promotes_and_a_failing_smoke_keeps_it_serving(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl, tmp_path: Path
) -> None:
    def apply(tag: str, **spec: Any) -> None:
        ref, digest = published(cluster, tag)
        manifest = run_manifest("canaried", ref, digest)
        manifest["spec"].update(target="kubernetes", **spec)
        user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))

    def settled_at(revision: int, generation: int) -> dict[str, Any] | None:
        status = status_of(user, namespace, "canaried")
        progressing = {c["type"]: c for c in status.get("conditions") or []}.get("Progressing")
        done = progressing is not None and progressing["status"] == "False"
        ok = done and status.get("observedGeneration") == generation
        return status if ok and status.get("revision") == revision else None

    apply("41")
    wait_for(lambda: settled_at(1, 1), timeout=120, message="revision 1")
    apply("42")
    status = wait_for(lambda: settled_at(2, 2), timeout=120, message="revision 2 promoted")
    assert [entry["revision"] for entry in status["history"]] == [1, 2]
    releases = admin.run("get", "deployments", "-n", namespace, "-o", "name").stdout.split()
    assert releases == ["deployment.apps/canaried-r2"]  # revision 1's release is gone

    failing = {"smoke": {"input": {"topic": "x"}, "expect": {"equals": "never this"}}}
    apply("43", canary=failing)
    status = wait_for(lambda: settled_at(2, 3), timeout=120, message="smoke failure rolled back")
    degraded = {c["type"]: c for c in status["conditions"]}["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "SmokeFailed")
    releases = admin.run("get", "deployments", "-n", namespace, "-o", "name").stdout.split()
    assert releases == ["deployment.apps/canaried-r2"]  # the canary (revision 3) is removed
    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "still"}}))
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/canaried/invoke"
    assert "still" in user.run("create", "--raw", path, "-f", str(body)).stdout
    user.run("delete", "-n", namespace, "wfr/canaried", "--timeout=120s")


def test_the_deploys_benchmark_times_apply_to_ready_on_the_kubernetes_target(
    cluster: Cluster, namespace: str, user: Kubectl
) -> None:
    ref, digest = published(cluster, "51")
    result = subprocess.run(
        [
            sys.executable, "-m", "plnt.bench", "deploys",
            "--kubeconfig", str(user.kubeconfig), "--namespace", namespace,
            "--ref", ref, "--digest", digest, "--target", "kubernetes", "--deploys", "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "apply → Ready, target kubernetes, 2 deploys:"
    p50 = float(lines[1].split()[1])
    assert 0 < p50 < 300


def test_an_image_that_cannot_be_pulled_fails_the_install_at_once_naming_the_cause(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl
) -> None:
    simulator = cluster.kubelet
    assert simulator is not None
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    image = f"ghcr.io/plnt-work/plnt:{chart['appVersion']}"  # the chart's default image

    async def failing(on: bool) -> None:
        if on:
            await simulator.fail_pull(image)
        else:
            simulator.images.failing.discard(image)

    cluster.standin.call(failing(True))
    try:
        ref, digest = published(cluster, "61")
        manifest = run_manifest("pull", ref, digest)
        manifest["spec"]["target"] = "kubernetes"
        user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))

        def failed() -> dict[str, Any] | None:
            status = status_of(user, namespace, "pull")
            ready = {c["type"]: c for c in status.get("conditions") or []}.get("Ready")
            return ready if ready and ready["reason"] == "InstallFailed" else None

        ready = wait_for(failed, timeout=120, message="Ready False, InstallFailed")
    finally:
        cluster.standin.call(failing(False))
    message = ready["message"]
    assert "ErrImagePull" in message or "ImagePullBackOff" in message, message
    assert image in message and "retrying in" in message  # time may fix it: tried again
    uid = json.loads(user.run("get", "-n", namespace, "wfr", "pull", "-o", "json").stdout)[
        "metadata"
    ]["uid"]
    wait_for(lambda: objects(admin, namespace, uid) == [], timeout=60, message="the canary removed")
    user.run("delete", "-n", namespace, "wfr/pull", "--timeout=120s")
