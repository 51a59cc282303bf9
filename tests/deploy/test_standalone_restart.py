"""`plnt up` as users run it (embedded Temporal, in-process worker) across a full restart.

Runner processes outlive `plnt up` on purpose: after a restart on the same state
directory the promoted revision still answers, and the next saga adopts its replicas
instead of starting new ones. Deleting the run then leaves no process behind.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plnt.processes.ports import free_port
from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.manifests import workflowrun
from tests.support.plnt_server import REPO, ChildProcess, Kubectl, PlntServer
from tests.support.processes import live_processes
from tests.support.stack import kill_strays, publish, runner_pids


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "state"
    try:
        yield directory
    finally:
        kill_strays(directory)


def test_runners_keep_serving_across_a_restart_and_are_adopted_not_duplicated(
    state: Path, tmp_path: Path
) -> None:
    ref, digest = publish(state / "layouts" / "examples", "fanout", EXAMPLE.read_text())
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    server = PlntServer(state, sagas=True).start()
    try:
        kubectl = Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)
        assert any(line.startswith("Temporal at 127.0.0.1:") for line in server.output)
        kubectl.run("apply", "-f", "-", input=workflowrun("kept", ref, digest))
        kubectl.run("wait", "--for=condition=Ready", "wfr/kept", "--timeout=90s")
        uid = kubectl.json("get", "wfr/kept")["metadata"]["uid"]
        before = runner_pids(state, contains=uid)
        assert len(before) == 1
    finally:
        assert server.stop() == 0
    assert runner_pids(state, contains=uid) == before  # still serving while plnt is down

    server = PlntServer(state, port=server.port, sagas=True).start()
    api = Api(server.kubeconfig)
    try:
        kubectl = Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)
        answer = api.invoke("default", "kept", {"topic": "restarts"})
        assert answer.revision == "1"
        assert answer.output["topic"] == "restarts"

        kubectl.run("scale", "wfr/kept", "--replicas=2")

        def scaled(obj: dict[str, Any]) -> bool:
            return (obj.get("status") or {}).get("readyReplicas") == 2

        api.wait("default", "kept", scaled, message="two ready replicas")
        after = runner_pids(state, contains=uid)
        assert len(after) == 2 and before <= after  # the first replica was adopted

        kubectl.run("delete", "wfr/kept", "--timeout=90s")
        assert runner_pids(state, contains=uid) == set()
    finally:
        api.close()
        server.stop()


def test_an_unreachable_temporal_address_is_a_one_line_error_and_nothing_keeps_running(
    tmp_path: Path,
) -> None:
    closed = free_port()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "plnt",
            "up",
            "--state-dir",
            str(tmp_path / "state"),
            "--port",
            str(free_port()),
            "--temporal-address",
            f"127.0.0.1:{closed}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error: cannot connect to Temporal at 127.0.0.1:{closed}: connection refused\n"
    )
    assert "plnt is ready" not in result.stdout
    assert not live_processes(str(tmp_path))


def test_ctrl_c_stops_plnt_up_in_order_and_leaves_no_process(tmp_path: Path) -> None:
    """SIGINT to the whole foreground group reaches only plnt: it stops its worker and
    server first, then Temporal and etcd, so nothing complains that etcd went away."""
    state = tmp_path / "state"
    argv = [
        sys.executable,
        "-m",
        "plnt",
        "up",
        "--state-dir",
        str(state),
        "--port",
        str(free_port()),
    ]
    child = ChildProcess(argv, "plnt is ready", "plnt up", start_timeout=90.0, own_session=True)
    child.start()
    try:
        assert live_processes("etcd", str(state)) and live_processes("temporal", str(state))
        code = child.interrupt()
    finally:
        child.stop()
    transcript = "".join(child.output)
    assert code == 0, transcript
    assert "lost etcd" not in transcript and "Traceback" not in transcript
    assert not live_processes(str(state))
