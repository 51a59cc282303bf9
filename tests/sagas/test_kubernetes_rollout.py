"""When the Kubernetes target calls a rollout done, and what it says when it is not (pure)."""

from __future__ import annotations

from typing import Any

from plnt.sagas.targets import kubernetes


def deployment(
    spec: int, *, generation: int = 2, observed: int = 2, **status: int
) -> dict[str, Any]:
    counts = {"replicas": spec, "updatedReplicas": spec, "availableReplicas": spec, **status}
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": spec},
        "status": {"observedGeneration": observed, **counts},
    }


def test_a_rollout_is_done_when_its_generation_runs_every_replica_updated_and_available() -> None:
    assert kubernetes._rolled_out(deployment(3), 3)
    assert not kubernetes._rolled_out(deployment(3, observed=1), 3)  # status is older
    assert not kubernetes._rolled_out(deployment(3, availableReplicas=2), 3)
    assert not kubernetes._rolled_out(deployment(3, replicas=4), 3)  # an old pod still runs
    assert not kubernetes._rolled_out(deployment(2), 3)


def test_with_an_hpa_any_count_at_least_the_runs_is_done() -> None:
    assert kubernetes._rolled_out(deployment(5), 3, autoscaled=True)
    assert not kubernetes._rolled_out(deployment(2), 3, autoscaled=True)
    assert not kubernetes._rolled_out(deployment(5), 3)


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def test_pod_causes_name_each_waiting_container_and_mark_the_ones_waiting_cannot_fix() -> None:
    crashing = pod(
        "r-1",
        containerStatuses=[
            {
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
                "lastState": {"terminated": {"message": "spec not found\n"}},
            }
        ],
    )
    pending = pod(
        "r-2",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            }
        ],
    )
    causes, fatal = kubernetes.pod_causes([pending])
    assert causes == ["r-2: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."]
    assert not fatal  # a node may be added: wait until the deadline
    causes, fatal = kubernetes.pod_causes([crashing, pending])
    assert causes[0] == "r-1: CrashLoopBackOff: spec not found"
    assert fatal
