"""`plnt up --workers 2`: two API server processes share the port, each a full replica.

One real `plnt up --workers 2 --max-mutating-requests-inflight 2` (with Temporal and a
separate deploy worker, as the other deploy tests) serves the whole module. Fresh
connections land on either worker (the kernel spreads them, `SO_REUSEPORT`), so each
assertion made through many fresh connections (a `kubectl` process each) holds whichever
worker answers: reads see writes at once, watches see creates, sagas and invocations work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plnt.bench import cputime
from plnt.processes.temporal import TemporalDevServer
from tests.deploy.conftest import (
    Api,
    Stack,
    apply,
    backend_manifest,
    running_stack,
    workflowrun,
)
from tests.support.plnt_server import Kubectl, PlntServer, wait_for

FRESH_CONNECTIONS = 12


@pytest.fixture(scope="module")
def stack(temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The module's one `plnt up --workers 2` (overrides the deploy tests' single process)."""
    with running_stack(
        temporal,
        tmp_path_factory.mktemp("plnt-workers"),
        "--workers", "2", "--max-mutating-requests-inflight", "2",
    ) as built:  # fmt: skip
        yield built


def worker_children(server: PlntServer) -> set[int]:
    """The parent's `plnt.standalone.apiprocess` children."""
    assert server.process is not None
    return set(cputime.children_running(server.process.pid, "plnt.standalone.apiprocess"))


def sockets_on(port: int, state: str) -> set[int]:
    """Inodes of the loopback TCP sockets on local `port` in `state` (0A listen, 01 open)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == state:
            inodes.add(int(fields[9]))
    return inodes


def socket_inodes_of(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def kubectl_for(stack: Stack, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    return Kubectl(kubeconfig=stack.server.kubeconfig, cache_dir=cache)


def test_both_workers_listen_on_the_port_and_fresh_connections_reach_each(
    stack: Stack, tmp_path: Path
) -> None:
    assert stack.server.process is not None
    parent = stack.server.process.pid
    [child] = worker_children(stack.server)
    listening = sockets_on(stack.server.port, "0A")
    assert socket_inodes_of(parent) & listening
    assert socket_inodes_of(child) & listening

    # Connections held open at once: the kernel hands some to each worker.
    command = [
        "openssl", "s_client", "-quiet", "-connect", f"127.0.0.1:{stack.server.port}",
        "-CAfile", str(stack.server.pki_dir / "ca.crt"),
    ]  # fmt: skip
    clients = [
        subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(FRESH_CONNECTIONS)
    ]
    try:

        def both_hold_connections() -> bool:
            open_ = sockets_on(stack.server.port, "01")
            return bool(socket_inodes_of(parent) & open_) and bool(socket_inodes_of(child) & open_)

        wait_for(both_hold_connections, timeout=30, message="connections on both workers")
    finally:
        for client in clients:
            client.kill()
            client.communicate()


def test_in_flight_limits_are_the_servers_totals_shared_among_the_workers(
    stack: Stack, tmp_path: Path
) -> None:
    kubectl = kubectl_for(stack, tmp_path)
    for _ in range(4):  # a kubectl process each: whichever worker answers, it answers for both
        metrics = kubectl.run("get", "--raw", "/metrics").stdout
        limits = {
            (sample.labels["worker"], sample.labels["request_kind"], sample.value)
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
            if sample.name == "plnt_apiserver_inflight_limit"
        }
        assert limits == {
            ("0", "mutating", 1.0),
            ("1", "mutating", 1.0),
            ("0", "readOnly", 100.0),
            ("1", "readOnly", 100.0),
        }, limits


def test_a_write_through_one_connection_is_read_at_once_through_fresh_ones(
    stack: Stack, tmp_path: Path, namespace: str
) -> None:
    kubectl = kubectl_for(stack, tmp_path)
    for index in range(6):
        name = f"b{index}"
        apply(kubectl, namespace, backend_manifest(name, "echo", endpoint=None))
        got = kubectl.json("get", "plntbackend", name, "-n", namespace)
        assert got["metadata"]["name"] == name
        listed = kubectl.json("get", "plntbackends", "-n", namespace)
        assert {item["metadata"]["name"] for item in listed["items"]} >= {name}


def test_a_watch_on_one_connection_sees_creates_made_through_others(
    stack: Stack, tmp_path: Path, namespace: str
) -> None:
    kubectl = kubectl_for(stack, tmp_path)
    names = {f"w{index}" for index in range(6)}
    lines: list[str] = []
    with kubectl.background("get", "plntbackends", "-n", namespace, "-w", "-o", "name") as watch:
        assert watch.stdout is not None
        stdout = watch.stdout
        threading.Thread(target=lambda: lines.extend(stdout), daemon=True).start()
        for name in sorted(names):
            apply(kubectl, namespace, backend_manifest(name, "echo", endpoint=None))
        wait_for(
            lambda: {line.strip().rsplit("/", 1)[-1] for line in list(lines)} >= names,
            timeout=30,
            message="every create in the watch",
        )


def test_a_workflowrun_applied_with_kubectl_becomes_ready_and_is_invoked_through_either_worker(
    stack: Stack, tmp_path: Path, namespace: str
) -> None:
    kubectl = kubectl_for(stack, tmp_path)
    ref, digest = stack.spec("workers-1")
    apply(kubectl, namespace, workflowrun("shared", ref, digest))
    for _ in range(3):  # a new client each time: new connections, either worker
        api = Api(stack.server.kubeconfig)
        try:
            obj = api.wait_settled(namespace, "shared", timeout=120)
            assert obj["status"]["phase"] == "Ready", obj["status"]
            assert api.invoke(namespace, "shared", {"topic": "etcd"}).revision == "1"
        finally:
            api.close()
    # The run's invocation log is the server's, whichever worker served each call or reads it.
    log_path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/shared/invocationlog"

    def every_call_logged() -> bool:
        return all(
            len(json.loads(kubectl.run("get", "--raw", log_path).stdout)["items"]) == 3
            for _ in range(4)
        )

    wait_for(every_call_logged, timeout=30, message="the three calls in every worker's log")


def test_a_killed_worker_is_restarted_and_counted_while_the_port_keeps_answering(
    stack: Stack, tmp_path: Path
) -> None:
    kubectl = kubectl_for(stack, tmp_path)
    [child] = worker_children(stack.server)
    os.kill(child, signal.SIGKILL)
    replaced = wait_for(
        lambda: (pids := worker_children(stack.server)) and pids != {child} and pids,
        timeout=60,
        message="a new worker process",
    )
    [new] = replaced
    wait_for(
        lambda: socket_inodes_of(new) & sockets_on(stack.server.port, "0A"),
        timeout=60,
        message="the new worker listening",
    )
    for _ in range(FRESH_CONNECTIONS):
        assert kubectl.run("get", "--raw", "/readyz").stdout == "ok"

    def restart_counted() -> bool:
        metrics = kubectl.run("get", "--raw", "/metrics").stdout
        return any(
            sample.name == "plnt_child_restarts_total"
            and sample.labels == {"child": "apiserver-worker", "worker": "0"}
            and sample.value == 1.0
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
        )

    # Whichever worker answers /metrics carries the parent's (worker 0's) restart count.
    wait_for(restart_counted, timeout=60, interval=0.2, message="the restart counted")
    assert any("apiserver-worker (pid" in line for line in stack.server.output)


def test_stopping_the_parent_leaves_no_worker_process(tmp_path: Path) -> None:
    server = PlntServer(tmp_path / "state", extra_args=("--workers", "2"))
    server.start()
    try:
        [child] = worker_children(server)
    finally:
        code = server.stop()
    assert code == 0, "".join(server.output)
    assert not Path(f"/proc/{child}").exists()
