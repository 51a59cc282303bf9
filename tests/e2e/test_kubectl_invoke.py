"""`kubectl create --raw …/invoke -f input.json` reaches a real runner through a real plnt.

The runner is a `python -m plnt.runner` child process with the echo backend; the test
publishes it in `status.traffic` with `kubectl patch --subresource=status`, as the saga
would.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.examples import EXAMPLES
from tests.support.plnt_server import Kubectl

pytestmark = pytest.mark.e2e

DIGEST = "sha256:" + "ab" * 32
START_DEADLINE_SECONDS = 30.0


@contextlib.contextmanager
def runner_process() -> Iterator[str]:
    """A runner on a free port; yields its URL; always killed and reaped."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plnt.runner",
            "--spec",
            str(EXAMPLES / "chat.workflow.yaml"),
            "--backend-type",
            "echo",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + START_DEADLINE_SECONDS
            ready = selector.select(timeout=max(0.0, deadline - time.monotonic()))
        assert ready, "the runner did not print its listening line in time"
        line = process.stdout.readline()
        assert "listening on " in line, line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_kubectl_create_raw_invoke_prints_the_runner_answer(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    run = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "inv", "namespace": namespace},
        "spec": {"workflow": {"ref": "oci-layout:chat:1", "digest": DIGEST}},
    }
    manifest = tmp_path / "wfr.yaml"
    manifest.write_text(yaml.safe_dump(run))
    kubectl.run("apply", "-f", str(manifest))
    with runner_process() as url:
        traffic = {
            "status": {
                "revision": 1,
                "traffic": [{"revision": 1, "digest": DIGEST, "weight": 100, "endpoints": [url]}],
            }
        }
        kubectl.run(
            "patch",
            "wfr",
            "inv",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(traffic),
        )
        inputs = tmp_path / "input.json"
        inputs.write_text(json.dumps({"inputs": {"question": "what is plnt?"}}))
        path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/inv/invoke"
        answer = json.loads(kubectl.run("create", "--raw", path, "-f", str(inputs)).stdout)
        assert answer["output"] == "what is plnt?"
        assert answer["cache"]["misses"] == 1

        log = json.loads(
            kubectl.run("get", "--raw", path.replace("/invoke", "/invocationlog")).stdout
        )
        assert [entry["endpoint"] for entry in log["items"]] == [url]
