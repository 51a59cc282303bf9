"""Events plnt writes to the cluster, against the stand-in: the API server's
(`plnt.kube.events.ClusterEvents`), where a repeat of the same Event is counted into one,
as client-go's correlator does, and a different message is an Event of its own; and the
worker's PlntBackend transitions, which go to the cluster as the saga's Events do (the
worker's kubeconfig names the cluster), repeats counted there too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from yarl import URL

from plnt.api.events import event_about
from plnt.kube import connecting
from plnt.kube.events import ClusterEvents
from tests.support.cluster import Cluster
from tests.support.llm import threaded_llm
from tests.support.plnt_server import wait_for
from tests.support.stack import WorkerProcess


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


@pytest.fixture
def probing_worker(cluster: Cluster, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A second `plnt worker` with the worker's cluster identity that only probes, every
    0.2 s (no saga uses its task queue)."""
    worker = WorkerProcess(
        cluster.worker.temporal_address,
        cluster.directory / "worker.kubeconfig",
        tmp_path / "prober",
        extra_args=("--task-queue", "plnt-probe-only", "--probe-interval", "0.2"),
    ).start()
    try:
        yield worker
    finally:
        worker.stop()


def test_backend_transitions_are_events_in_the_cluster_as_the_sagas_are(
    cluster: Cluster, namespace: str, ann: str, tmp_path: Path, probing_worker: WorkerProcess
) -> None:
    kubectl = cluster.kubectl(ann, tmp_path)
    selector = "involvedObject.kind=PlntBackend,involvedObject.name=flaky"

    def events_are(*expected: tuple[str, int]) -> None:
        def listed() -> bool:
            found = kubectl.json("get", "events", "-n", namespace, "--field-selector", selector)
            items = sorted(found["items"], key=lambda e: e["metadata"]["name"])
            return [(e["reason"], e["count"]) for e in items] == list(expected)

        wait_for(listed, timeout=30, interval=0.3, message=f"the Events {expected}")

    with threaded_llm(None) as llm:
        port = URL(llm.url).port
        manifest = {
            "apiVersion": "plnt.work/v1",
            "kind": "PlntBackend",
            "metadata": {"name": "flaky"},
            "spec": {"type": "openai", "endpoint": llm.url},
        }
        kubectl.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
        events_are(("BackendReachable", 1))
    events_are(("BackendReachable", 1), ("BackendUnreachable", 1))
    with threaded_llm(None, port=port):
        events_are(("BackendReachable", 1), ("BackendUnreachable", 1), ("BackendReachable", 1))
    # The same failure again is counted into its Event in the cluster (a PATCH there).
    events_are(("BackendReachable", 1), ("BackendUnreachable", 2), ("BackendReachable", 1))

    obj = kubectl.json("get", "-n", namespace, "plntbackend", "flaky")
    stored = [e for e in cluster.standin.events(namespace) if e["reason"] == "BackendUnreachable"]
    [event] = stored
    assert event["source"] == {"component": "plnt-prober"}
    assert event["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert event["involvedObject"]["apiVersion"] == "plnt.work/v1"
    described = kubectl.run("describe", "-n", namespace, "plntbackend", "flaky").stdout
    assert "BackendUnreachable" in described
