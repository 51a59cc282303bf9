"""`plnt worker`'s composition: the deploy worker alone, against any Temporal and any plnt
API server.

The CLI (`plnt.cli.worker`) parses its flags into `WorkerSettings`, an API client and a
`TemporalConnection`, and calls `run`; from there this module connects to Temporal,
starts the Kubernetes target when a runner chart is given, serves the worker's
Prometheus metrics when a port is given (with a Prometheus file SD target under the
state directory), says it is ready, and runs the worker until SIGINT or SIGTERM. The
worker reads and writes WorkflowRuns only through the API client, so it runs anywhere
that reaches both. Beside `plnt.standalone.serving` (which runs the same worker inside
`plnt up`) and `plnt.cluster.serving`.

Errors: `WorkerError`, one line naming what could not start (Temporal, the cluster of
`--runner-chart`, the metrics port); the API client is closed before it is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plnt.client.clients import PlntClient
from plnt.kube.errors import ClusterError
from plnt.processes import signals
from plnt.sagas import metrics as saga_metrics
from plnt.sagas import worker
from plnt.sagas.control import DeployUnavailable
from plnt.sagas.starter import TemporalConnection
from plnt.sagas.targets import local_scrape
from plnt.sagas.targets.routes import ClusterRoutes
from plnt.workflowspec.signers import SignaturePolicy


class WorkerError(Exception):
    """`plnt worker` cannot start: the message says what, in one line."""


@dataclass(frozen=True)
class Cluster:
    """Where the Kubernetes target installs runner releases (`--runner-chart` and friends)."""

    chart: str
    kubeconfig: Path | None
    settings: dict[str, Any]
    storage_driver: str
    routes: ClusterRoutes | None = None
    """`--routes`: the worker keeps runs' Gateway API HTTPRoutes, with these defaults."""


@dataclass(frozen=True)
class WorkerSettings:
    """What `plnt worker` was asked for."""

    state_dir: Path
    task_queue: str
    probe_interval: float
    cluster: Cluster | None = None
    metrics_at: tuple[str, int] | None = None
    """(host, port) to serve `GET /metrics` on (port 0: a free one); None: not served."""
    signatures: SignaturePolicy | None = None
    """Trusted signers and the namespaces whose specs and datasets must be signed."""


@dataclass(frozen=True)
class Ready:
    """Where the started worker polls, and where its metrics are, for the start-up lines."""

    task_queue: str
    temporal_address: str
    metrics_url: str | None


async def serve(
    api: PlntClient,
    connection: TemporalConnection,
    settings: WorkerSettings,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[Ready], None] | None = None,
) -> None:
    """Run the worker until `stop` is set; `WorkerError` when a part cannot start."""
    try:
        client = await connection.connect()
    except DeployUnavailable as error:
        await api.close()
        raise WorkerError(str(error)) from error
    async with contextlib.AsyncExitStack() as stack:
        kubernetes = None
        if settings.cluster is not None:
            cluster = settings.cluster
            try:
                kubernetes = await stack.enter_async_context(
                    worker.kubernetes_target(
                        chart=cluster.chart,
                        kubeconfig=cluster.kubeconfig,
                        settings=cluster.settings,
                        storage_driver=cluster.storage_driver,
                        routes=cluster.routes,
                    )
                )
            except ClusterError as error:
                await api.close()
                raise WorkerError(f"--runner-chart: {error}") from error
        activities = worker.local_activities(
            api, settings.state_dir, kubernetes=kubernetes, signatures=settings.signatures
        )
        metrics = None
        metrics_url = None
        if settings.metrics_at is not None:
            metrics = saga_metrics.SagaMetrics()
            host, wanted = settings.metrics_at
            try:
                port = await stack.enter_async_context(
                    saga_metrics.serving(metrics, host=host, port=wanted)
                )
            except OSError as error:
                await api.close()
                raise WorkerError(f"--metrics-port {wanted}: {error.strerror or error}") from error
            stack.enter_context(
                local_scrape.worker_target(local_scrape.targets_dir(settings.state_dir), host, port)
            )
            metrics_url = f"http://{host}:{port}/metrics"
        if on_ready is not None:
            on_ready(Ready(settings.task_queue, connection.address, metrics_url))
        await worker.run_until(
            client,
            activities,
            stop,
            task_queue=settings.task_queue,
            probe_interval=settings.probe_interval,
            metrics=metrics,
        )


def run(
    api: PlntClient,
    connection: TemporalConnection,
    settings: WorkerSettings,
    *,
    on_ready: Callable[[Ready], None],
) -> None:
    """Blocking entry point for the CLI: run the worker until SIGINT or SIGTERM."""
    signals.run_until_signalled(
        lambda stop: serve(api, connection, settings, stop=stop, on_ready=on_ready)
    )
