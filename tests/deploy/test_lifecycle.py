"""A run's life after its deploy, end to end: scaling without a new revision, and deletion.

Real kubectl, a real API server, a real Temporal and worker, real runner processes
counted through /proc.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from plnt.client import errors as client_errors
from tests.support.blocking_api import Api
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack, runner_pids, runner_pids_by_revision


def scaled_to(replicas: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == obj["metadata"]["generation"]
            and status.get("replicas") == replicas
            and status.get("readyReplicas") == replicas
        )

    return check


def test_scale_changes_the_replicas_of_the_revision_without_a_new_revision(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("scale", version="6.0.0")
    apply(kubectl, namespace, workflowrun("wide", ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/wide", "--timeout=60s")
    uid = api.get(namespace, "wide")["metadata"]["uid"]
    scale_path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/wide/scale"

    for replicas in (3, 1):
        kubectl.run("scale", "-n", namespace, "wfr/wide", f"--replicas={replicas}")
        obj = api.wait(namespace, "wide", scaled_to(replicas), message=f"{replicas} ready")
        status = obj["status"]
        assert (status["revision"], status["digest"]) == (1, digest)
        assert [entry["revision"] for entry in status["history"]] == [1]
        assert len(status["traffic"][0]["endpoints"]) == replicas
        ready = kubectl.run(
            "get", "-n", namespace, "wfr/wide", "-o", "jsonpath={.status.readyReplicas}"
        ).stdout
        assert ready == str(replicas)
        scale = json.loads(kubectl.run("get", "--raw", scale_path).stdout)
        assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (replicas, replicas)
        by_revision = runner_pids_by_revision(stack.state_dir, uid=uid)
        assert set(by_revision) == {1} and len(by_revision[1]) == replicas, by_revision
        assert runner_pids(stack.state_dir, contains=uid) == by_revision[1]

    assert api.invoke(namespace, "wide", {"topic": "etcd"}).revision == "1"


def test_delete_waits_for_the_teardown_and_leaves_no_runner_process(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("delete", version="7.0.0")
    apply(kubectl, namespace, workflowrun("gone", ref, digest, replicas=2))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/gone", "--timeout=60s")
    uid = api.get(namespace, "gone")["metadata"]["uid"]
    assert len(runner_pids(stack.state_dir, contains=uid)) == 2

    kubectl.run("delete", "-n", namespace, "wfr/gone", "--wait", "--timeout=60s", timeout=90)

    missing = kubectl.run("get", "-n", namespace, "wfr/gone", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stderr
    with pytest.raises(client_errors.NotFound):
        api.get(namespace, "gone")
    # The teardown stopped every replica before it released the finalizer.
    assert runner_pids(stack.state_dir, contains=uid) == set()


def test_deleting_the_namespace_tears_its_runs_down_before_the_namespace_goes(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("namespace", version="8.0.0")
    apply(kubectl, namespace, workflowrun("inside", ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/inside", "--timeout=60s")
    uid = api.get(namespace, "inside")["metadata"]["uid"]
    assert len(runner_pids(stack.state_dir, contains=uid)) == 1

    # kubectl waits until the namespace is gone: the controller deleted the run through
    # its delete path, and the run's teardown finalizer held the namespace meanwhile.
    deleted = kubectl.run("delete", "namespace", namespace, "--timeout=90s", timeout=120)
    assert deleted.stdout.strip() == f'namespace "{namespace}" deleted'

    missing = kubectl.run("get", "namespace", namespace, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stderr
    with pytest.raises(client_errors.NotFound):
        api.get(namespace, "inside")
    assert runner_pids(stack.state_dir, contains=uid) == set()
    events = kubectl.json("get", "events", "-n", namespace)
    assert events["items"] == []
