"""The deploy worker: runs the saga's workflow and activities against a Temporal server.

It runs inside `plnt up` (standalone) or alone as `plnt worker`, anywhere that can
reach Temporal and the API server. Activities are async and run on the worker's event
loop; the workflow runs in Temporal's sandbox, which re-imports only the modules the
workflow module does not pass through.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from temporalio import client as temporal_client
from temporalio import worker as temporal_worker

from plnt.client.clients import PlntClient
from plnt.kube import connecting
from plnt.kube.releases import HelmReleases
from plnt.kube.workloads import Workloads
from plnt.sagas import backend_probes, deploy, placement
from plnt.sagas import values as v
from plnt.sagas.activities import DeployActivities
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets.interface import Target
from plnt.sagas.targets.kubernetes import KubernetesTarget
from plnt.sagas.targets.local import LocalTarget
from plnt.workflowspec import sources


def local_activities(
    api: PlntClient,
    state_dir: Path,
    *,
    config: sources.SourceSettings | None = None,
    kubernetes: Target | None = None,
) -> DeployActivities:
    """Activities with the local target, the spec cache and the layout root under `state_dir`
    (and the Kubernetes target, when the worker runs with a cluster)."""
    return DeployActivities(
        api=api,
        target=LocalTarget(state_dir / "runners", secrets_dir=state_dir / "secrets"),
        specs=SpecCache(state_dir / "specs", config=config, layout_root=state_dir / "layouts"),
        kubernetes=kubernetes,
    )


@contextlib.asynccontextmanager
async def kubernetes_target(
    *,
    chart: str,
    kubeconfig: Path | None,
    settings: dict[str, Any] | None = None,
    storage_driver: str = "secret",
) -> AsyncIterator[KubernetesTarget]:
    """The Kubernetes target on the cluster `kubeconfig` names (None: as kubectl would
    find it; in a pod, its service account), releasing its clients on exit."""
    releases = HelmReleases(kubeconfig=kubeconfig, storage_driver=storage_driver)
    try:
        async with connecting.api_client(kubeconfig) as api:
            yield KubernetesTarget(
                releases=releases, workloads=Workloads(api), chart=chart, settings=settings
            )
    finally:
        releases.close()


def build(
    client: temporal_client.Client,
    activities: DeployActivities,
    *,
    task_queue: str = v.TASK_QUEUE,
) -> temporal_worker.Worker:
    """A worker for the deploy saga on `task_queue`."""
    return temporal_worker.Worker(
        client,
        task_queue=task_queue,
        workflows=[deploy.WorkflowRunController],
        activities=activities.all(),
        max_concurrent_activities=64,
    )


async def run_until(
    client: temporal_client.Client,
    activities: DeployActivities,
    stop: asyncio.Event,
    *,
    task_queue: str = v.TASK_QUEUE,
    probe_interval: float = placement.DEFAULT_PROBE_INTERVAL,
) -> None:
    """Run a worker until `stop` is set, then shut it down (in-flight activities end)."""
    async with running(client, activities, task_queue=task_queue, probe_interval=probe_interval):
        await stop.wait()


@contextlib.asynccontextmanager
async def running(
    client: temporal_client.Client,
    activities: DeployActivities,
    *,
    task_queue: str = v.TASK_QUEUE,
    probe_interval: float = placement.DEFAULT_PROBE_INTERVAL,
) -> AsyncIterator[None]:
    """A worker polling `task_queue` while the block runs; then it stops (in-flight
    activities end) and the activities' clients close.

    While it runs, every PlntBackend is probed every `probe_interval` seconds (0: never)
    through the activities' API client; the prober stops before that client closes.
    """
    worker = build(client, activities, task_queue=task_queue)
    try:
        async with worker, backend_probes.periodic(activities.api, interval=probe_interval):
            yield
    finally:
        await activities.close()
