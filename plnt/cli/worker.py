"""`plnt worker`: run the deploy worker alone, against any Temporal and any plnt API server.

The worker reads and writes WorkflowRuns through the API server named by a kubeconfig
(as kubectl would; inside a pod, its service account), and starts runner processes
under `--state-dir` (the local target). Temporal is reached with the same options as
`plnt serve` (`temporal_options`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from plnt.cli import exits
from plnt.cli.temporal_options import TemporalOptions, with_temporal_options
from plnt.cli.up import exit_now
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient

if TYPE_CHECKING:
    from plnt.sagas.starter import TemporalConnection

TASK_QUEUE = "plnt-deploy"  # plnt.sagas.values.TASK_QUEUE, without importing the SDK here


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
    code = asyncio.run(_run(api, connection, state_dir.expanduser().resolve(), task_queue))
    exit_now(code)


async def _run(
    api: PlntClient, connection: TemporalConnection, state_dir: Path, task_queue: str
) -> int:
    from plnt.sagas import worker as saga_worker
    from plnt.sagas.control import DeployUnavailable

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
    activities = saga_worker.local_activities(api, state_dir)
    print(f"plnt worker polling {task_queue} on {connection.address}", flush=True)
    await saga_worker.run_until(client, activities, stop, task_queue=task_queue)
    return 0
