"""GitOps tools wait for a WorkflowRun: Helm 4's kstatus waiter against standalone plnt.

The Helm SDK (`helm_python`: Helm 4 as a library, no binary) installs, upgrades and
uninstalls a chart holding a PlntBackend and a WorkflowRun against a real `plnt up`
(real etcd, a real Temporal dev server, a separate real worker, real runner processes),
with the memory release driver. `wait="watcher"` is Helm's kstatus waiter, the rules
Flux and kpt use too: it returns only once every object is Current, and gives up on one
that is Failed (kstatus's reading of `Stalled=True`). The stack fixtures are the deploy
tests' (`tests/support/stack.py`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from plnt.client import errors as client_errors
from tests.support.blocking_api import Api
from tests.support.kstatus import compute
from tests.support.stack import Stack, runner_pids
from tests.support.statuses import condition_of

WAIT_SECONDS = 90
"""Helm's own timeout for a wait: far above a deploy here, so only a fault reaches it."""


def chart(root: Path, ref: str, digest: str, *, version: str = "0.1.0") -> Path:
    """A chart holding an echo PlntBackend and a WorkflowRun pinned at (`ref`, `digest`)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "templates").mkdir(exist_ok=True)
    (root / "Chart.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v2", "name": "agent", "version": version})
    )
    backend = {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": "echo"},
        "spec": {"type": "echo", "models": ["echo-1"]},
    }
    run = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "agent"},
        "spec": {
            "workflow": {"ref": ref, "digest": digest},
            "backend": {"name": "echo"},
            "replicas": 1,
        },
    }
    (root / "templates" / "backend.yaml").write_text(yaml.safe_dump(backend))
    (root / "templates" / "run.yaml").write_text(yaml.safe_dump(run))
    return root


@pytest.fixture
def helm(stack: Stack, namespace: str) -> Iterator[helm_python.Config]:
    """A Helm configuration on the stack's kubeconfig, releases kept in memory."""
    config = helm_python.Config(
        kubeconfig_path=str(stack.server.kubeconfig),
        namespace=namespace,
        storage_driver="memory",
    )
    try:
        yield config
    finally:
        config.close()


def kstatus_of(obj: dict[str, Any]) -> str:
    return compute(obj).status


def test_install_with_the_watcher_returns_once_the_run_is_ready_and_uninstall_after_teardown(
    stack: Stack, api: Api, helm: helm_python.Config, namespace: str, tmp_path: Path
) -> None:
    ref, digest = stack.spec("gitops", version="7.0.0")
    release = helm.install(
        chart(tmp_path / "agent", ref, digest),
        "agent",
        namespace=namespace,
        wait="watcher",
        timeout=WAIT_SECONDS,
    )
    run = api.get(namespace, "agent")  # read at once: install has returned

    assert release["status"] == "deployed"
    ready = condition_of(run, "Ready")
    assert ready is not None and ready["status"] == "True", run.get("status")
    assert run["status"]["observedGeneration"] == run["metadata"]["generation"] == 1
    assert condition_of(run, "Reconciling") is None and condition_of(run, "Stalled") is None
    assert (run["status"]["phase"], run["status"]["revision"]) == ("Ready", 1)
    assert kstatus_of(run) == "Current"
    uid = run["metadata"]["uid"]
    runners = runner_pids(stack.state_dir, contains=uid)
    assert runners, "the promoted revision has a runner process"

    # An upgrade that changes the spec is a new generation: waited for the same way.
    ref2, digest2 = stack.spec("gitops-2", version="7.0.1")
    helm.upgrade(
        chart(tmp_path / "agent", ref2, digest2, version="0.2.0"),
        "agent",
        namespace=namespace,
        wait="watcher",
        timeout=WAIT_SECONDS,
    )
    upgraded = api.get(namespace, "agent")
    assert upgraded["metadata"]["generation"] == 2
    assert upgraded["status"]["observedGeneration"] == 2
    assert (upgraded["status"]["revision"], upgraded["status"]["digest"]) == (2, digest2)
    assert kstatus_of(upgraded) == "Current"
    runners = runner_pids(stack.state_dir, contains=uid)
    assert runners

    helm.uninstall("agent", wait="watcher", timeout=WAIT_SECONDS)

    with pytest.raises(client_errors.NotFound):
        api.get(namespace, "agent")  # gone: the teardown saga released its finalizer
    assert not runner_pids(stack.state_dir, contains=uid), "runners outlived the uninstall"


def test_install_with_the_watcher_fails_on_a_run_whose_deploy_cannot_succeed(
    stack: Stack, api: Api, helm: helm_python.Config, namespace: str, tmp_path: Path
) -> None:
    ref, _ = stack.spec("gitops-bad", version="7.1.0")
    wrong = "sha256:" + "0" * 64  # a valid digest that is not the spec's: never retried
    began = time.monotonic()
    with pytest.raises(helm_python.HelmError) as failure:
        helm.install(
            chart(tmp_path / "agent", ref, wrong),
            "agent",
            namespace=namespace,
            wait="watcher",
            timeout=WAIT_SECONDS,
        )
    waited = time.monotonic() - began

    message = str(failure.value)
    assert "WorkflowRun" in message and "agent" in message, message
    assert "Failed" in message and "digest mismatch" in message, message  # Stalled's message
    run = api.get(namespace, "agent")
    stalled = condition_of(run, "Stalled")
    assert stalled is not None and stalled["status"] == "True", run.get("status")
    assert stalled["reason"] == "DigestMismatch"
    assert stalled["observedGeneration"] == run["metadata"]["generation"]
    assert condition_of(run, "Reconciling") is None
    assert kstatus_of(run) == "Failed"
    assert waited < WAIT_SECONDS, f"Helm waited its whole timeout ({waited:.1f} s)"
