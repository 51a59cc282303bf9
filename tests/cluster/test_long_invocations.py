"""A workflow that runs longer than kube-apiserver's request timeout, through a cluster.

kube-apiserver cuts every request that is not long-running at `--request-timeout`; the
stand-in does the same (`tests/support/kube/timeouts.py`), here with the limit shortened
to `LIMIT` seconds for the test. The workflow's second step calls a gate that holds it
until the test releases it, and the test releases it only once the limit has visibly
passed: `kubectl create --raw …/invoke`, sent after every other call was already held,
has got kube's 504. Then `plnt invoke` (plain and `--stream`) and `kubectl create --raw
…/proxy/invoke` — both on the run's `proxy` subresource, which kube treats as
long-running — get the workflow's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import Cluster, run_manifest
from tests.support.gate import gated_workflow, threaded_gate
from tests.support.kube.policy import Rule
from tests.support.plnt_server import Kubectl
from tests.support.stack import publish

LIMIT = 2.0
"""The stand-in's --request-timeout in this test (kube's is 60 s)."""
KUBE_TIMEOUT_ERROR = (
    "Error from server (Timeout): the server was unable to return a response in the time "
    "allotted, but may still be processing the request"
)
"""What kubectl prints for kube's 504: its body comes as text/plain, so client-go uses its
own words for the status."""


def started(command: list[str], home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes of the test, killed and reaped however it ends."""
    running: list[subprocess.Popen[str]] = []
    try:
        yield running
    finally:
        for child in running:
            if child.poll() is None:
                child.kill()
            child.communicate()


def finished(child: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=timeout)
    return child.returncode, out, err


def test_calls_through_the_proxy_outlive_the_request_timeout_that_cuts_invoke_with_a_504(
    cluster: Cluster, tmp_path: Path, children: list[subprocess.Popen[str]]
) -> None:
    namespace = f"l-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(namespace)
    token, user = f"lea-{namespace}", f"lea-{namespace}"
    cluster.standin.add_user(token, user)
    cluster.standin.allow(
        Rule(("*",), user=user, api_groups=("plnt.work",), resources=("*",), namespace=namespace)
    )
    kubectl: Kubectl = cluster.kubectl(token, tmp_path)
    with threaded_gate() as gate:
        layout = cluster.directory / "worker" / "layouts" / "cluster"
        ref, digest = publish(layout, f"long-{namespace}", gated_workflow(f"{gate.url}/hold"))
        manifest = yaml.safe_dump(run_manifest("long", ref, digest))
        kubectl.run("apply", "-n", namespace, "-f", "-", input=manifest)
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/long", "--timeout=120s")

        run = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/long"
        body = tmp_path / "in.json"
        body.write_text(json.dumps({"inputs": {"who": "raw"}}))

        def plnt_invoke(*args: str) -> list[str]:
            return [sys.executable, "-m", "plnt", "invoke", "long", *args, "-n", namespace,
                    "--kubeconfig", str(kubectl.kubeconfig)]  # fmt: skip

        with cluster.standin.requests_cut_after(LIMIT):
            began = time.monotonic()
            plain = started(plnt_invoke("--input", "who=plain", "-v"), tmp_path)
            streamed = started(plnt_invoke("--input", "who=stream", "--stream"), tmp_path)
            proxied = started(
                kubectl.command("create", "--raw", f"{run}/proxy/invoke", "-f", str(body)),
                tmp_path,
            )
            children.extend((plain, streamed, proxied))
            gate.wait_for_arrivals(3)

            cut = started(
                kubectl.command("create", "--raw", f"{run}/invoke", "-f", str(body)), tmp_path
            )
            children.append(cut)
            code, out, err = finished(cut)
            assert (code, out) == (1, ""), err
            assert err.strip() == KUBE_TIMEOUT_ERROR
            held_past_the_limit = time.monotonic() - began
            gate.release()

            results = {name: finished(child) for name, child in
                       (("plain", plain), ("stream", streamed), ("proxied", proxied))}  # fmt: skip
            took = time.monotonic() - began

    assert held_past_the_limit >= LIMIT and took >= LIMIT
    code, out, err = results["plain"]
    assert code == 0, err
    assert json.loads(out) == ["hello plain", {"opened": True}]
    details = err.splitlines()  # -v: what answered, as through `…/invoke`
    assert "revision: 1" in details, err
    assert any(line in details for line in ("cache: hit", "cache: miss", "cache: off")), err
    assert any(line.startswith("timing: apiserver ") for line in details), err

    code, out, err = results["stream"]
    assert code == 0, err
    assert json.loads(out) == ["hello stream", {"opened": True}]
    steps = err.splitlines()
    assert steps[0].startswith("✓ greet  ") and steps[1].startswith("✓ call  "), err

    code, out, err = results["proxied"]
    assert code == 0, err
    assert json.loads(out)["output"] == ["hello raw", {"opened": True}]

    logged = json.loads(kubectl.run("get", "--raw", f"{run}/invocations").stdout)["items"]
    through_proxy = [e for e in logged if e.get("path") == "/invoke" and e["status"] == 200]
    assert len(through_proxy) == 3, logged
    assert all(entry["durationMs"] >= LIMIT * 1000 for entry in through_proxy), logged
