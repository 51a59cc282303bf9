"""`plnt worker`: run the deploy worker alone, against any Temporal and any plnt API server.

The worker reads and writes WorkflowRuns through the API server named by a kubeconfig
(as kubectl would; inside a pod, its service account), and starts runner processes
under `--state-dir` (the local target). Temporal is reached with the same options as
`plnt serve` (`temporal_options`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from plnt.cli import exits
from plnt.cli.temporal_options import TemporalOptions, with_temporal_options
from plnt.cli.up import exit_now
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient

if TYPE_CHECKING:
    from plnt.sagas.starter import TemporalConnection

TASK_QUEUE = "plnt-deploy"  # plnt.sagas.values.TASK_QUEUE, without importing the SDK here
PROBE_INTERVAL = 30.0  # plnt.sagas.placement.DEFAULT_PROBE_INTERVAL, likewise


def register(app: typer.Typer) -> None:
    """Add `worker` to `app`."""
    app.command(
        "worker",
        epilog=(
            "Example: plnt worker --temporal-address 127.0.0.1:7233 "
            "--kubeconfig ~/.plnt/kubeconfig --state-dir ~/.plnt"
        ),
    )(worker)


@with_temporal_options
def worker(
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where runner processes and specs are kept.")
    ],
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="Kubeconfig of the plnt API (default: as kubectl, in a pod its service account).",
        ),
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="Kubeconfig context.")] = None,
    task_queue: Annotated[
        str, typer.Option("--task-queue", help="Task queue to poll.")
    ] = TASK_QUEUE,
    runner_chart: Annotated[
        str | None,
        typer.Option(
            "--runner-chart",
            envvar="PLNT_RUNNER_CHART",
            help="The workflow-runner chart (path or oci:// reference): enables target: "
            "kubernetes, in the cluster the kubeconfig names.",
        ),
    ] = None,
    runner_values: Annotated[
        Path | None,
        typer.Option(
            "--runner-values",
            envvar="PLNT_RUNNER_VALUES",
            help="YAML values every runner release shares (image, gpuClasses, ingress ...).",
        ),
    ] = None,
    helm_storage_driver: Annotated[
        str, typer.Option("--helm-storage-driver", help="Where Helm keeps releases.")
    ] = "secret",
    probe_interval: Annotated[
        float,
        typer.Option(
            "--probe-interval",
            min=0.0,
            help="Seconds between probes of every PlntBackend's reachability and load "
            "(0: probe only when a deploy resolves its backend).",
        ),
    ] = PROBE_INTERVAL,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve the worker's Prometheus metrics at GET /metrics on this port "
            "(0: a free one, printed); default: not served.",
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address the metrics port listens on.")
    ] = "0.0.0.0",
    *,
    temporal: TemporalOptions,
) -> None:
    """Run the deploy saga's workflow and activities until interrupted."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    connection = temporal.connection()
    if connection is None:
        typer.echo("error: --temporal-address is required", err=True)
        exit_now(int(exits.Code.USAGE))
        return
    try:
        api = PlntClient.from_kubeconfig(kubeconfig, context=context)
    except client_errors.KubeconfigError as error:
        typer.echo(f"error: {error}", err=True)
        exit_now(int(exits.Code.FAILED))
        return
    settings: dict[str, Any] | None = None
    if runner_values is not None:
        try:
            settings = yaml.safe_load(runner_values.read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            typer.echo(f"error: --runner-values {runner_values}: {error}", err=True)
            exit_now(int(exits.Code.USAGE))
            return
    cluster = (
        Cluster(runner_chart, kubeconfig, settings or {}, helm_storage_driver)
        if runner_chart
        else None
    )
    code = asyncio.run(
        _run(
            api,
            connection,
            state_dir.expanduser().resolve(),
            task_queue,
            cluster,
            probe_interval=probe_interval,
            metrics_at=None if metrics_port is None else (metrics_host, metrics_port),
        )
    )
    exit_now(code)


@dataclass(frozen=True)
class Cluster:
    """Where the Kubernetes target installs runner releases (`--runner-chart` and friends)."""

    chart: str
    kubeconfig: Path | None
    settings: dict[str, Any]
    storage_driver: str


async def _run(
    api: PlntClient,
    connection: TemporalConnection,
    state_dir: Path,
    task_queue: str,
    cluster: Cluster | None,
    *,
    probe_interval: float,
    metrics_at: tuple[str, int] | None = None,
) -> int:
    from plnt.kube.errors import ClusterError
    from plnt.sagas import metrics as saga_metrics
    from plnt.sagas import worker as saga_worker
    from plnt.sagas.control import DeployUnavailable
    from plnt.sagas.targets import local_scrape

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        client = await connection.connect()
    except DeployUnavailable as error:
        typer.echo(f"error: {error}", err=True)
        await api.close()
        return int(exits.Code.UNAVAILABLE)
    async with contextlib.AsyncExitStack() as stack:
        kubernetes = None
        if cluster is not None:
            try:
                kubernetes = await stack.enter_async_context(
                    saga_worker.kubernetes_target(
                        chart=cluster.chart,
                        kubeconfig=cluster.kubeconfig,
                        settings=cluster.settings,
                        storage_driver=cluster.storage_driver,
                    )
                )
            except ClusterError as error:
                typer.echo(f"error: --runner-chart: {error}", err=True)
                await api.close()
                return int(exits.Code.UNAVAILABLE)
        activities = saga_worker.local_activities(api, state_dir, kubernetes=kubernetes)
        metrics = None
        if metrics_at is not None:
            metrics = saga_metrics.SagaMetrics()
            host, wanted = metrics_at
            try:
                port = await stack.enter_async_context(
                    saga_metrics.serving(metrics, host=host, port=wanted)
                )
            except OSError as error:
                typer.echo(f"error: --metrics-port {wanted}: {error.strerror or error}", err=True)
                await api.close()
                return int(exits.Code.UNAVAILABLE)
            stack.enter_context(
                local_scrape.worker_target(local_scrape.targets_dir(state_dir), host, port)
            )
            print(f"plnt worker metrics at http://{host}:{port}/metrics", flush=True)
        print(f"plnt worker polling {task_queue} on {connection.address}", flush=True)
        await saga_worker.run_until(
            client,
            activities,
            stop,
            task_queue=task_queue,
            probe_interval=probe_interval,
            metrics=metrics,
        )
    return 0
