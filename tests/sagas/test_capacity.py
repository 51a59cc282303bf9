"""How many of a revision's pods each node pool can hold (pure: Nodes and Pods as served)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from plnt.sagas.targets import capacity

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(
    name: str, pool: str, *, cpu: str = "4", gpus: int = 0, taints: Any = ()
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": {capacity.POOL_LABEL: pool}},
        "spec": {"taints": list(taints)},
        "status": {"allocatable": allocatable},
    }


def pod_on(
    node_name: str, *, cpu: str = "1", gpus: int = 0, phase: str = "Running"
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "spec": {
            "nodeName": node_name,
            "containers": [{"resources": {"requests": {"cpu": cpu}, "limits": limits}}],
        },
        "status": {"phase": phase},
    }


NODES = [
    node("cpu-1", "cpu"),
    node("cpu-2", "cpu", cpu="2"),
    node("gpu-1", "gpu", gpus=1, taints=[GPU_TAINT]),
]
TOLERATE_GPU = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("2", "2"), ("1Gi", str(2**30)), ("1k", "1000"), ("1e3", "1000")],
)
def test_quantities_read_as_kube_writes_them(text: str, value: str) -> None:
    assert capacity.quantity(text) == Decimal(value)


def test_a_malformed_quantity_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        capacity.quantity("lots")


def test_cpu_pods_fit_by_the_room_left_after_scheduled_pods_and_finished_ones_do_not_count() -> (
    None
):
    pod = capacity.Pod({"cpu": Decimal(1)}, {capacity.POOL_LABEL: "cpu"})
    scheduled = [pod_on("cpu-1", cpu="3"), pod_on("cpu-2", cpu="2", phase="Succeeded")]
    (cpu,) = capacity.pools(NODES, scheduled, pod, label=capacity.POOL_LABEL)
    assert (cpu.name, cpu.fits) == ("cpu", 1 + 2)


def test_a_gpu_pod_needs_a_tolerating_node_with_a_free_gpu() -> None:
    wants_gpu = capacity.requests_of({"limits": {"nvidia.com/gpu": 1}})
    assert wants_gpu == {"nvidia.com/gpu": Decimal(1)}
    untolerated = capacity.Pod(wants_gpu, {})
    assert capacity.pools(NODES, [], untolerated, label=capacity.POOL_LABEL)[0].fits == 0
    tolerated = capacity.Pod(wants_gpu, {}, TOLERATE_GPU)
    best = capacity.pools(NODES, [], tolerated, label=capacity.POOL_LABEL)[0]
    assert (best.name, best.fits) == ("gpu", 1)
    busy = capacity.pools(NODES, [pod_on("gpu-1", gpus=1)], tolerated, label=capacity.POOL_LABEL)
    assert all(pool.fits == 0 for pool in busy)


def test_requests_are_described_as_a_human_writes_them() -> None:
    described = capacity.describe({"cpu": Decimal("0.5"), "nvidia.com/gpu": Decimal(2)})
    assert described == "cpu: 500m, nvidia.com/gpu: 2"
