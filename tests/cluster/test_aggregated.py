"""plnt behind kube-apiserver's aggregator: what a user of a cluster sees, end to end.

The real kubectl talks to the kube-apiserver stand-in with a token; the stand-in
authenticates, authorizes and proxies `/apis/plnt.work/v1` to `plnt serve` with the
front-proxy certificate. plnt trusts that only because the cluster's authentication
ConfigMap says so, asks the cluster about bearer tokens (TokenReview) and every
request (SubjectAccessReview), and writes Events to the cluster, where `kubectl
describe` (against the stand-in) finds them beside the saga's own.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import APISERVER_USER, Cluster, direct, published, run_manifest
from tests.support.kube.policy import Rule
from tests.support.plnt_server import wait_for


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(name)
    return name


def test_a_token_user_applies_waits_invokes_and_describes_through_the_aggregator(
    cluster: Cluster, namespace: str, ann: str, tmp_path: Path
) -> None:
    kubectl = cluster.kubectl(ann, tmp_path)
    ref, digest = published(cluster, "1")
    kubectl.run(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump(run_manifest("hello", ref, digest)),
    )
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/hello", "--timeout=120s")

    table = kubectl.run("get", "wfr", "-n", namespace).stdout.splitlines()
    assert table[0].split()[:2] == ["NAME", "WORKFLOW"] and table[1].split()[0] == "hello"

    body = tmp_path / "input.json"
    body.write_text(json.dumps({"inputs": {"topic": "aggregation"}}))
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/hello/invoke"
    answer = json.loads(kubectl.run("create", "--raw", path, "-f", str(body)).stdout)
    assert "aggregation" in json.dumps(answer["output"])

    def described() -> str | None:
        out = kubectl.run("describe", "-n", namespace, "wfr", "hello").stdout
        return out if "Accepted" in out and "Promoted" in out else None

    text = wait_for(described, timeout=30, message="Events of both plnt serve and the saga")
    events = cluster.standin.events(namespace)
    reasons = {(e["source"].get("component"), e["reason"]) for e in events}
    assert ("plnt", "Accepted") in reasons  # the API server's, written to the cluster
    assert ("plnt-deploy", "Promoted") in reasons  # the saga's, through the worker
    assert "Events:" in text


def test_a_watch_through_the_aggregator_streams_changes(
    cluster: Cluster, namespace: str, ann: str, tmp_path: Path
) -> None:
    kubectl = cluster.kubectl(ann, tmp_path)
    ref, digest = published(cluster, "2")
    watcher = subprocess.Popen(
        kubectl.command("get", "wfr", "-n", namespace, "-w", "--output-watch-events"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"HOME": str(tmp_path)},
    )
    try:
        kubectl.run(
            "apply",
            "-n",
            namespace,
            "-f",
            "-",
            input=yaml.safe_dump(run_manifest("seen", ref, digest)),
        )
        assert watcher.stdout is not None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = watcher.stdout.readline()
            lines.append(line)
            if line.split()[:2] == ["ADDED", "seen"]:
                break
        assert any(line.split()[:2] == ["ADDED", "seen"] for line in lines), lines
    finally:
        watcher.kill()
        watcher.wait()
        if watcher.stdout is not None:
            watcher.stdout.close()


def test_a_user_the_cluster_denies_gets_kubes_403_from_plnt_itself(
    cluster: Cluster, namespace: str
) -> None:
    cluster.standin.add_user("viewer-token", "viewer", ["viewers"])
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    code, status = direct(cluster, path, headers={"Authorization": "Bearer viewer-token"})
    assert code == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'workflowruns.plnt.work is forbidden: User "viewer" cannot list resource '
        f'"workflowruns" in API group "plnt.work" in the namespace "{namespace}"'
    )
    asked = [
        review["spec"]
        for review in cluster.standin.subject_access_reviews
        if review["spec"].get("user") == "viewer"
    ]
    assert asked and asked[-1]["resourceAttributes"]["resource"] == "workflowruns"
    assert asked[-1]["resourceAttributes"]["verb"] == "list"


def test_a_bearer_token_sent_to_plnt_directly_is_reviewed_by_the_cluster(
    cluster: Cluster, namespace: str, ann: str
) -> None:
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    code, listed = direct(cluster, path, headers={"Authorization": f"Bearer {ann}"})
    assert (code, listed["kind"]) == (200, "WorkflowRunList")
    assert any(r["spec"]["token"] == ann for r in cluster.standin.token_reviews)
    code, status = direct(cluster, path, headers={"Authorization": "Bearer not-a-token"})
    assert (code, status["reason"]) == (401, "Unauthorized")


def test_x_remote_headers_without_the_front_proxy_certificate_are_not_identity(
    cluster: Cluster, namespace: str
) -> None:
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    forged = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
    code, status = direct(cluster, path, headers=forged)
    assert (code, status["reason"]) == (401, "Unauthorized")


def test_subject_access_reviews_that_fail_never_allow(
    cluster: Cluster, namespace: str, ann: str
) -> None:
    refusal = cluster.standin.allow(
        Rule(("create",), user=APISERVER_USER, api_groups=("authorization.k8s.io",),
             resources=("subjectaccessreviews",), deny=True, name="no-reviews")
    )  # fmt: skip
    try:
        path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns?limit=7"
        code, status = direct(cluster, path, headers={"Authorization": f"Bearer {ann}"})
        assert code == 500, status
        assert status["message"].startswith("Internal error occurred: subjectaccessreviews")
    finally:
        cluster.standin.policy.remove(refusal)


def test_a_rotated_front_proxy_ca_is_applied_without_a_restart(
    cluster: Cluster, namespace: str, ann: str, tmp_path: Path
) -> None:
    kubectl = cluster.kubectl(ann, tmp_path)
    old_cert, old_key = (
        cluster.standin.front_proxy_client_cert,
        cluster.standin.front_proxy_client_key,
    )
    old = tmp_path / "old-front-proxy.crt", tmp_path / "old-front-proxy.key"
    old[0].write_bytes(old_cert.read_bytes())
    old[1].write_bytes(old_key.read_bytes())
    cluster.standin.rotate_front_proxy_ca()

    def works() -> bool:
        result = kubectl.run("get", "wfr", "-n", namespace, check=False)
        return result.returncode == 0

    wait_for(works, timeout=30, message="kubectl through the aggregator after the rotation")
    context = cluster.plnt_context()
    context.load_cert_chain(*old)
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    try:
        code, _ = direct(cluster, path, headers={"X-Remote-User": "system:admin"}, context=context)
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        code = 0  # the handshake itself refused a certificate of a CA no longer trusted
    assert code in (0, 401), code
