"""The Temporal dev server SIGKILLed mid-saga: `plnt up` restarts it and the saga completes.

A real `plnt up` as users run it (embedded Temporal, in-process worker). The deploy is
held in its install step (the canary's first runner is stopped with SIGSTOP as soon as
it exists, as the deploy tests' worker-kill test does), the Temporal child is killed,
and the runner is let go once a new Temporal serves on the same port. plnt itself is
not restarted: its Temporal client and worker reconnect, the saga resumes from its
history and ends Ready with one serving revision and no orphan runner, and a run
written after the restart is started through the same client and deploys too.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.manifests import workflowrun
from tests.support.plnt_server import Kubectl, PlntServer, wait_for
from tests.support.processes import live_processes
from tests.support.stack import kill_strays, publish, runner_pids, runner_pids_by_revision
from tests.support.statuses import condition_of, step_of


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    state = tmp_path_factory.mktemp("plnt-temporal-kill")
    try:
        with PlntServer(state, sagas=True) as srv:
            yield srv
    finally:
        kill_strays(state)


@pytest.fixture
def kubectl(server: PlntServer, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)


@pytest.fixture
def api(server: PlntServer) -> Iterator[Api]:
    facade = Api(server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()


def temporal_pids(state: Path) -> set[int]:
    return live_processes("start-dev", str(state / "temporal.db"))


def ready_at_generation(obj: dict[str, Any]) -> bool:
    ready = condition_of(obj, "Ready")
    status = obj.get("status") or {}
    return (
        ready is not None
        and ready["status"] == "True"
        and status.get("phase") == "Ready"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


def assert_one_serving_revision(state: Path, obj: dict[str, Any]) -> None:
    """Revision 1 serves with the replicas asked for, and no other runner of the run lives."""
    uid, replicas = obj["metadata"]["uid"], obj["spec"].get("replicas", 1)
    by_revision = runner_pids_by_revision(state, uid=uid)
    assert set(by_revision) == {1} and len(by_revision[1]) == replicas, by_revision
    assert runner_pids(state, contains=uid) == by_revision[1]
    assert obj["status"]["revision"] == 1
    assert obj["status"]["readyReplicas"] == replicas


def test_a_sigkilled_temporal_is_restarted_and_the_saga_in_flight_completes(
    server: PlntServer, kubectl: Kubectl, api: Api
) -> None:
    state = server.state_dir
    ref, digest = publish(state / "layouts" / "examples", "fanout", EXAMPLE.read_text())
    kubectl.run("apply", "-f", "-", input=workflowrun("held", ref, digest, replicas=2))
    uid = api.wait("default", "held", lambda obj: True, message="created")["metadata"]["uid"]
    (old_temporal,) = temporal_pids(state)

    # Hold the saga in install: its first runner cannot become ready while stopped.
    held = wait_for(lambda: runner_pids(state, contains=uid), timeout=60, message="a runner")
    for pid in held:
        os.kill(pid, signal.SIGSTOP)
    try:
        killed_at = time.monotonic()
        os.kill(old_temporal, signal.SIGKILL)
        (new_temporal,) = wait_for(
            lambda: temporal_pids(state) - {old_temporal}, timeout=30, message="a new Temporal"
        )
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)
    restarted = time.monotonic() - killed_at

    obj = api.wait("default", "held", ready_at_generation, timeout=90, message="held Ready")
    print(
        f"\nTemporal SIGKILL mid-install: a new server process after {restarted:.2f} s,"
        f" the run Ready {time.monotonic() - killed_at:.2f} s after the kill"
        f" (install attempts: {(step_of(obj, 'install') or {}).get('attempts')})"
    )
    assert_one_serving_revision(state, obj)
    install = step_of(obj, "install")
    assert install is not None and install["state"] == "Succeeded", install
    assert held <= runner_pids(state, contains=uid)  # the held runner was kept, not replaced

    # The API server's Temporal client carries on: a new run starts its saga and deploys.
    kubectl.run("apply", "-f", "-", input=workflowrun("after", ref, digest))
    after = api.wait("default", "after", ready_at_generation, timeout=90, message="after Ready")
    assert_one_serving_revision(state, after)
    assert api.invoke("default", "held", {"topic": "restarts"}).revision == "1"

    transcript = "".join(server.output)
    pattern = rf"temporal \(pid {old_temporal}\) exited with code -9 \(SIGKILL\); restarting"
    assert re.search(pattern, transcript), transcript[-2000:]
    assert "etcd (pid" not in transcript  # only Temporal was restarted
    assert temporal_pids(state) == {new_temporal}  # and only once
    metrics = api.call(lambda c: c.request("GET", "/metrics")).body.decode()
    assert 'plnt_child_restarts_total{child="temporal"} 1.0' in metrics
    assert 'plnt_child_restarts_total{child="etcd"} 0.0' in metrics
