"""`spec.target: kubernetes` through the kube-apiserver stand-in and its kubelet simulator.

The worker installs each revision as a Helm release of `charts/workflow-runner` (the
Helm SDK, talking to the stand-in), waits for the Deployment to roll out, and reads the
runner endpoints from EndpointSlices; the simulated kubelet runs each pod as a real
`plnt runner` process. The same WorkflowRun YAML as standalone, with one field changed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.conftest import Cluster
from tests.cluster.test_aggregated import published, run_manifest
from tests.support.kube.policy import Rule
from tests.support.plnt_server import Kubectl, wait_for


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(name)
    return name


@pytest.fixture
def user(cluster: Cluster, namespace: str, tmp_path: Path) -> Kubectl:
    token = f"dev-{namespace}"
    cluster.standin.add_user(token, token)
    cluster.standin.allow(
        Rule(("*",), user=token, api_groups=("plnt.work",), resources=("*",), namespace=namespace)
    )
    return cluster.kubectl(token, tmp_path / "dev")


@pytest.fixture
def admin(cluster: Cluster, tmp_path: Path) -> Kubectl:
    cluster.standin.add_user("cluster-admin-token", "cluster-admin", ["system:masters"])
    return cluster.kubectl("cluster-admin-token", tmp_path / "admin")


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
    user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
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
