"""`plnt worker`: run the deploy worker alone, against any Temporal and any plnt API server.

The worker reads and writes WorkflowRuns through the API server named by a kubeconfig
(as kubectl would; inside a pod, its service account), and starts runner processes
under `--state-dir` (the local target). Temporal is reached with the same options as
`plnt serve` (`temporal_options`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from plnt.cli import exits
from plnt.cli.signature_options import SignatureOptions, with_signature_options
from plnt.cli.temporal_options import TemporalOptions, with_temporal_options
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes.exiting import exit_now
from plnt.sagas.values import TASK_QUEUE

if TYPE_CHECKING:
    from plnt.sagas.serving import Ready as WorkerReady

PROBE_INTERVAL = 30.0  # plnt.sagas.probing.placement.DEFAULT_PROBE_INTERVAL, without pydantic here


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
@with_signature_options
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
    routes: Annotated[
        str | None,
        typer.Option(
            "--routes",
            envvar="PLNT_ROUTES",
            help="Keep a Gateway API HTTPRoute per routed run (target: kubernetes), with these "
            'defaults as JSON: {"gateway": {"name", "namespace", "sectionName"}, "hostnames", '
            '"path", "everyRun"} ({} : only runs that set spec.route).',
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
    signatures: SignatureOptions,
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
    from plnt.sagas import serving  # the Temporal SDK only when the command runs
    from plnt.sagas.targets.routes import ClusterRoutes

    try:
        cluster_routes = ClusterRoutes.parse(routes) if routes is not None else None
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        exit_now(int(exits.Code.USAGE))
        return
    cluster = (
        serving.Cluster(
            runner_chart, kubeconfig, settings or {}, helm_storage_driver, cluster_routes
        )
        if runner_chart
        else None
    )
    worker_settings = serving.WorkerSettings(
        state_dir=state_dir.expanduser().resolve(),
        task_queue=task_queue,
        probe_interval=probe_interval,
        cluster=cluster,
        metrics_at=None if metrics_port is None else (metrics_host, metrics_port),
        signatures=signatures.policy(),
    )
    try:
        serving.run(api, connection, worker_settings, on_ready=_print_ready)
    except serving.WorkerError as error:
        typer.echo(f"error: {error}", err=True)
        exit_now(int(exits.Code.UNAVAILABLE))
        return
    exit_now(0)


def _print_ready(ready: WorkerReady) -> None:
    if ready.metrics_url is not None:
        print(f"plnt worker metrics at {ready.metrics_url}", flush=True)
    print(f"plnt worker polling {ready.task_queue} on {ready.temporal_address}", flush=True)
