"""Deploys survive their own machinery dying: a SIGKILLed worker, a restarted API server.

The worker is a separate process (`plnt worker`), so it can be killed mid-activity (held
there by stopping the canary's first runner with SIGSTOP until the kill has landed);
Temporal notices through the install activity's 5 s heartbeat timeout and retries it on
the restarted worker, whose local target adopts the replicas already running. The API
server is stopped while a saga is in flight and started again on the same state; the
saga's status reports retry until it is back, and the start-up convergence resubmits any
run whose status lags its generation.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from tests.support.blocking_api import Api
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, restart_server, runner_pids, runner_pids_by_revision
from tests.support.statuses import condition_of, step_of


def ready_at_generation(obj: dict[str, Any]) -> bool:
    ready = condition_of(obj, "Ready")
    status = obj.get("status") or {}
    return (
        ready is not None
        and ready["status"] == "True"
        and status.get("phase") == "Ready"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


def assert_serves_with(stack: Stack, obj: dict[str, Any], replicas: int) -> None:
    uid = obj["metadata"]["uid"]
    by_revision = runner_pids_by_revision(stack.state_dir, uid=uid)
    assert set(by_revision) == {1} and len(by_revision[1]) == replicas, by_revision
    assert runner_pids(stack.state_dir, contains=uid) == by_revision[1]
    assert obj["status"]["readyReplicas"] == replicas


def test_a_worker_killed_during_install_resumes_the_saga_with_exactly_one_canary(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("killed", version="8.0.0")
    apply(kubectl, namespace, workflowrun("tough", ref, digest, replicas=3))
    uid = api.wait(namespace, "tough", lambda obj: True, message="created")["metadata"]["uid"]

    # An explicit hold: the canary's first runner is stopped (SIGSTOP) as soon as it
    # exists, so it cannot become ready and the install cannot finish before the kill.
    held = wait_for(
        lambda: runner_pids(stack.state_dir, contains=uid), timeout=60, message="a runner"
    )
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        stack.worker.kill()
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)
    stack.restart_worker()

    obj = api.wait(namespace, "tough", ready_at_generation, timeout=60, message="Ready")
    assert_serves_with(stack, obj, 3)
    assert obj["status"]["revision"] == 1
    install = step_of(obj, "install")
    assert install is not None and install["state"] == "Succeeded"
    # The install that finished was a retry on the new worker (Temporal's attempt
    # number, which the timeline records), and it adopted the held runner.
    assert install["attempts"] >= 2, install
    assert held <= runner_pids(stack.state_dir, contains=uid)
    assert api.invoke(namespace, "tough", {"topic": "etcd"}).revision == "1"


def test_runs_written_just_before_an_api_server_restart_converge(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("restart", version="8.1.0")
    apply(kubectl, namespace, workflowrun("early", ref, digest, replicas=2))

    def deploying(obj: dict[str, Any]) -> bool:
        return (obj.get("status") or {}).get("phase") == "Deploying"

    api.wait(namespace, "early", deploying, message="phase Deploying")
    apply(kubectl, namespace, workflowrun("late", ref, digest))
    restart_server(stack)

    early = api.wait(namespace, "early", ready_at_generation, timeout=60, message="early Ready")
    late = api.wait(namespace, "late", ready_at_generation, timeout=60, message="late Ready")
    assert_serves_with(stack, early, 2)
    assert_serves_with(stack, late, 1)
    assert api.invoke(namespace, "early", {"topic": "etcd"}).revision == "1"
    assert api.invoke(namespace, "late", {"topic": "etcd"}).revision == "1"
