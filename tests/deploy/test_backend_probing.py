"""The worker's periodic prober: PlntBackend status kept current without any deploy.

A second `plnt worker` probes every 0.2 s (on a task queue no saga uses, so it only
probes); a vLLM stand-in with a DCGM exporter beside it (tests/support/llm.py: no GPU
here) is registered, and its status follows what the stand-in reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.conftest import Stack, apply, backend_manifest
from tests.support.llm import Gpu, threaded_llm
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import WorkerProcess


@pytest.fixture
def probing_worker(stack: Stack) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(
        stack.temporal.address,
        stack.server.kubeconfig,
        stack.state_dir,
        extra_args=("--task-queue", "plnt-probe-only", "--probe-interval", "0.2"),
    ).start()
    try:
        yield worker
    finally:
        worker.stop()


def status_of(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = kubectl.json("get", "-n", namespace, "plntbackend", name)
    return obj.get("status") or {}


def test_the_worker_probes_every_backend_periodically_without_any_deploy(
    stack: Stack, kubectl: Kubectl, namespace: str, probing_worker: WorkerProcess
) -> None:
    with threaded_llm(None, load=(5, 2)) as llm:
        llm.kv_cache = 0.3
        llm.gpus = [Gpu(20.0, 1000.0, 23000.0), Gpu(97.0, 1000.0, 23000.0)]
        manifest = backend_manifest(
            "gpu-a",
            "vllm",
            endpoint=llm.url,
            metricsEndpoint=f"{llm.root}/dcgm/metrics",
            capacity={"maxConcurrency": 16, "gpus": 2},
        )
        apply(kubectl, namespace, manifest)

        first = wait_for(
            lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("inFlight") == 5 and s,
            timeout=20,
            interval=0.3,
            message="the first periodic probe",
        )
        assert first["reachable"] is True and first["queueDepth"] == 2
        assert first["gpuHeadroom"] == 1 and first["kvCacheUsage"] == 0.3
        assert isinstance(first["latencyMilliseconds"], int)
        [probed] = [c for c in first["conditions"] if c["type"] == "Probed"]
        assert (probed["status"], probed["reason"]) == ("True", "Fresh")

        # The load changes and no one deploys: the next rounds see it.
        llm.load = (1, 0)
        llm.kv_cache = 0.95
        later = wait_for(
            lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("inFlight") == 1 and s,
            timeout=20,
            interval=0.3,
            message="a later periodic probe",
        )
        assert later["gpuHeadroom"] == 0  # the KV cache is full, whatever the GPUs say
        assert later["lastProbeTime"] >= first["lastProbeTime"]

        wide = kubectl.run("get", "-n", namespace, "plntbackends", "-o", "wide").stdout
        header, row = wide.splitlines()[:2]
        columns = header.split()
        assert columns[:8] == [
            "NAME", "TYPE", "ENDPOINT", "REACHABLE", "IN-FLIGHT", "QUEUE", "LATENCY", "GPU-HEADROOM"
        ]  # fmt: skip
        cells = row.split()
        assert cells[6].endswith("ms") and cells[6][:-2].isdigit()

    down = wait_for(
        lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("reachable") is False and s,
        timeout=20,
        interval=0.3,
        message="the probe after the server stopped",
    )
    assert "inFlight" not in down and "gpuHeadroom" not in down  # unknown, not left over


def test_a_metrics_endpoint_that_is_not_an_http_url_is_refused_by_admission(
    kubectl: Kubectl, namespace: str
) -> None:
    manifest = backend_manifest(
        "bad", "vllm", endpoint="http://127.0.0.1:1/v1", metricsEndpoint="gpu-node:9400/metrics"
    )
    result = kubectl.run("apply", "-n", namespace, "-f", "-", input=manifest, check=False)
    assert result.returncode != 0
    assert "spec.metricsEndpoint" in result.stderr
    assert "must be an http or https URL with a host" in result.stderr
