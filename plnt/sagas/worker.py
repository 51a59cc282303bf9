"""The deploy worker: runs the saga's workflow and activities against a Temporal server.

It also runs the `/bench` subresource's workflow (`bench.BenchWorkflow`) and its
activities, which measure with `plnt.harness` and heartbeat their own progress, and every
Invocation's workflow (`invocation.InvocationWorkflow`) with its activities, which call
runners and heartbeat the steps that finished.

It runs inside `plnt up` (standalone) or alone as `plnt worker`, anywhere that can
reach Temporal and the API server. Activities are async and run on the worker's event
loop; the deploy and bench workflows run in Temporal's sandbox, which re-imports only the
modules the workflow module does not pass through, and the Invocation's workflow runs
outside it (`invocation.InvocationWorkflow` says why).

Liveness (`Liveness`, installed on every worker built here): Temporal learns that a
worker died mid-activity only from a missed heartbeat; without a heartbeat timeout it
waits out the activity's whole start-to-close timeout (a minute for pull, two for
smoke) before trying again elsewhere. So every activity the saga schedules without a
heartbeat timeout of its own gets `LIVENESS_TIMEOUT` (5 s) and a header saying so, and
the worker heartbeats for such an activity every `BEAT_PERIOD` while it runs: that
timeout measures the worker's life, never the activity's progress, and the activity's
start-to-close timeout still bounds a stuck call. Activities with a heartbeat timeout
of their own (install, analyze) keep heartbeating their progress themselves. Timeouts
and headers are not part of what replay compares, so recorded histories replay. The
workflow's own next task, meant for the dead worker's sticky queue, goes to any worker
after `STICKY_TIMEOUT` (3 s).

A lost Temporal server (a restart) needs nothing here: the SDK's client and the
worker's pollers retry until the server is back, then carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker
from temporalio.api.common.v1 import Payload

from plnt.client.clients import PlntClient
from plnt.kube import connecting
from plnt.kube.releases import HelmReleases
from plnt.kube.routes import HTTPRoutes
from plnt.kube.workloads import Workloads
from plnt.processes import forkserver, tasks
from plnt.sagas import values as v
from plnt.sagas.benching import workflow as bench
from plnt.sagas.benching.activities import BenchActivities
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.deploying.workflow import controller as deploy
from plnt.sagas.gating.activities import GateActivities
from plnt.sagas.invoking import workflow as invocation
from plnt.sagas.invoking.activities import InvocationActivities
from plnt.sagas.metrics import Observing, SagaMetrics
from plnt.sagas.probing import backend_probes, placement
from plnt.sagas.probing.activities import PlacementActivities
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets import local_scrape
from plnt.sagas.targets.interface import Target
from plnt.sagas.targets.kubernetes import KubernetesTarget
from plnt.sagas.targets.local import LocalTarget
from plnt.sagas.targets.routes import ClusterRoutes
from plnt.workflowspec import sources
from plnt.workflowspec.signers import SignaturePolicy


def local_activities(
    api: PlntClient,
    state_dir: Path,
    *,
    config: sources.SourceSettings | None = None,
    kubernetes: Target | None = None,
    signatures: SignaturePolicy | None = None,
) -> DeployActivities:
    """Activities with the local target, the spec cache and the layout root under `state_dir`
    (and the Kubernetes target, when the worker runs with a cluster). The local target
    keeps its runners' Prometheus SD files in `state_dir/prometheus`."""
    return DeployActivities(
        api=api,
        target=LocalTarget(
            state_dir / "runners",
            secrets_dir=state_dir / "secrets",
            scrape_dir=local_scrape.targets_dir(state_dir),
            prewarm=forkserver.enabled_by_default(),
        ),
        specs=SpecCache(state_dir / "specs", config=config, layout_root=state_dir / "layouts"),
        kubernetes=kubernetes,
        signatures=signatures,
    )


def placement_activities(activities: DeployActivities) -> PlacementActivities:
    """Placement's activities on the deploy activities' API client, HTTP session and Event
    poster (the periodic prober's too, so their repeats count into one Event)."""
    return PlacementActivities(
        api=activities.api, http=activities.http, events=activities.backend_events
    )


def gate_activities(activities: DeployActivities) -> GateActivities:
    """The quality gate's activities on the deploy activities' API client, spec cache and
    HTTP session (closed once, with the deploy's)."""
    return GateActivities(
        api=activities.api,
        specs=activities.specs,
        http=activities.http,
        probe_timeout=activities.probe_timeout,
    )


@contextlib.asynccontextmanager
async def kubernetes_target(
    *,
    chart: str,
    kubeconfig: Path | None,
    settings: dict[str, Any] | None = None,
    storage_driver: str = "secret",
    routes: ClusterRoutes | None = None,
) -> AsyncIterator[KubernetesTarget]:
    """The Kubernetes target on the cluster `kubeconfig` names (None: as kubectl would
    find it; in a pod, its service account), releasing its clients on exit. With
    `routes`, it keeps runs' HTTPRoutes too."""
    releases = HelmReleases(kubeconfig=kubeconfig, storage_driver=storage_driver)
    try:
        async with connecting.api_client(kubeconfig) as api:
            yield KubernetesTarget(
                releases=releases,
                workloads=Workloads(api),
                chart=chart,
                settings=settings,
                cluster_routes=routes,
                http_routes=HTTPRoutes(api) if routes is not None else None,
            )
    finally:
        releases.close()


LIVENESS_TIMEOUT = timedelta(seconds=5)
"""The heartbeat timeout of activities the saga schedules without one of their own."""
BEAT_PERIOD = 1.0
"""Seconds between the heartbeats the worker sends for such an activity."""
STICKY_TIMEOUT = timedelta(seconds=3)
"""How long a workflow task waits for the worker that ran the workflow last before any
worker may take it (the SDK's default is 10 s): after that worker died, the saga's
next step waits this long, and a local worker picks its tasks up in milliseconds."""
HEARTBEAT_THROTTLE = timedelta(seconds=1)
"""The longest the SDK holds an activity's heartbeat back (its default: 80% of the heartbeat
timeout), so a bench's progress reaches `GET …/bench` about once a second."""
_LIVENESS_HEADER = "plnt-liveness"
_MARK = Payload(data=b"1")


class Liveness(temporal_worker.Interceptor):
    """Lets Temporal notice a dead worker within seconds (see the module doc)."""

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return _BeatingActivity(next)

    def workflow_interceptor_class(
        self, input: temporal_worker.WorkflowInterceptorClassInput
    ) -> type[temporal_worker.WorkflowInboundInterceptor]:
        return _DefaultHeartbeatTimeout


class _BeatingActivity(temporal_worker.ActivityInboundInterceptor):
    """Heartbeats every `BEAT_PERIOD` while an activity scheduled with the liveness
    timeout runs (see the module doc)."""

    async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
        if _LIVENESS_HEADER not in input.headers:
            return await super().execute_activity(input)
        async with tasks.running(_beat(), name="activity liveness"):
            return await super().execute_activity(input)


async def _beat() -> None:
    """Runs in the activity's context (a task inherits it), so `heartbeat` reaches it."""
    while True:
        await asyncio.sleep(BEAT_PERIOD)  # the heartbeat period
        activity.heartbeat()


class _DefaultHeartbeatTimeout(temporal_worker.WorkflowInboundInterceptor):
    """Gives activities scheduled without a heartbeat timeout `LIVENESS_TIMEOUT`.
    Workflow code: deterministic, no I/O."""

    def init(self, outbound: temporal_worker.WorkflowOutboundInterceptor) -> None:
        super().init(_HeartbeatTimeoutOutbound(outbound))


class _HeartbeatTimeoutOutbound(temporal_worker.WorkflowOutboundInterceptor):
    def start_activity(self, input: temporal_worker.StartActivityInput) -> Any:
        if input.heartbeat_timeout is None:
            input.heartbeat_timeout = LIVENESS_TIMEOUT
            input.headers = {**input.headers, _LIVENESS_HEADER: _MARK}
        return super().start_activity(input)


def build(
    client: temporal_client.Client,
    activities: DeployActivities,
    *,
    task_queue: str = v.TASK_QUEUE,
    invocations: InvocationActivities,
    metrics: SagaMetrics | None = None,
) -> temporal_worker.Worker:
    """A worker for the deploy saga, benches and Invocations on `task_queue` (feeding
    `metrics`, when given). `invocations`: the Invocation activities (their runner session
    is the caller's to close)."""
    interceptors: list[temporal_worker.Interceptor] = [Liveness()]
    if metrics is not None:
        interceptors.append(Observing(metrics))
    return temporal_worker.Worker(
        client,
        task_queue=task_queue,
        workflows=[
            deploy.WorkflowRunController,
            bench.BenchWorkflow,
            invocation.InvocationWorkflow,
        ],
        activities=[
            *activities.all(),
            *placement_activities(activities).all(),
            *gate_activities(activities).all(),
            *BenchActivities.sharing(activities).all(),
            *invocations.all(),
        ],
        max_concurrent_activities=64,
        interceptors=interceptors,
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
    )


async def run_until(
    client: temporal_client.Client,
    activities: DeployActivities,
    stop: asyncio.Event,
    *,
    task_queue: str = v.TASK_QUEUE,
    probe_interval: float = placement.DEFAULT_PROBE_INTERVAL,
    metrics: SagaMetrics | None = None,
) -> None:
    """Run a worker until `stop` is set, then shut it down (in-flight activities end)."""
    async with running(
        client,
        activities,
        task_queue=task_queue,
        probe_interval=probe_interval,
        metrics=metrics,
    ):
        await stop.wait()


@contextlib.asynccontextmanager
async def running(
    client: temporal_client.Client,
    activities: DeployActivities,
    *,
    task_queue: str = v.TASK_QUEUE,
    probe_interval: float = placement.DEFAULT_PROBE_INTERVAL,
    metrics: SagaMetrics | None = None,
) -> AsyncIterator[None]:
    """A worker polling `task_queue` while the block runs; then it stops (in-flight
    activities end) and the activities' clients close.

    While it runs, every PlntBackend is probed every `probe_interval` seconds (0: never)
    through the activities' API client; the prober stops before that client closes.
    """
    calls = InvocationActivities(api=activities.api, metrics=metrics)
    worker = build(client, activities, task_queue=task_queue, metrics=metrics, invocations=calls)
    try:
        await activities.start()
        probing = backend_probes.periodic(
            activities.api, interval=probe_interval, events=activities.backend_events
        )
        async with worker, probing:
            yield
    finally:
        await calls.close()
        await activities.close()
