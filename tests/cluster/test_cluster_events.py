"""Events plnt writes to the cluster (`plnt.kube.events.ClusterEvents`), against the stand-in:
a repeat of the same Event is counted into one, as client-go's correlator does, and a
different message is an Event of its own."""

from __future__ import annotations

import uuid
from pathlib import Path

from plnt.api.events import event_about
from plnt.kube import connecting
from plnt.kube.events import ClusterEvents
from tests.cluster.conftest import Cluster


async def test_a_repeated_event_is_one_event_whose_count_grows(
    cluster: Cluster, tmp_path: Path
) -> None:
    namespace = f"e-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(namespace)
    involved = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "counted", "namespace": namespace, "uid": uuid.uuid4().hex},
    }
    config = cluster.directory / "apiserver.kubeconfig"
    async with connecting.api_client(config) as api:
        events = ClusterEvents(api)
        for _ in range(3):
            await events.write(
                event_about(
                    involved, type="Warning", reason="Flaky", message="same", component="plnt"
                )
            )
        await events.write(
            event_about(involved, type="Warning", reason="Flaky", message="other", component="plnt")
        )
    stored = sorted(cluster.standin.events(namespace), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in stored] == [("other", 1), ("same", 3)]
    same = stored[1]
    assert same["lastTimestamp"] >= same["firstTimestamp"]
    assert same["involvedObject"]["name"] == "counted"
