"""`plnt run -f FILE [--wait]`: create or update WorkflowRuns by server-side apply, then follow.

Parsing and printing only: `manifests` reads the file, `applying` applies each run and
follows its deploy. With `--wait`, a failed deploy prints the Ready/Degraded message and
exits 1 (`exits.Code.FAILED`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from plnt.cli import applying, connecting, exits, manifests, printing, progress
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient


def register(app: typer.Typer) -> None:
    """Add `run` to `app`."""
    app.command(
        "run",
        epilog="Example: plnt run -f summarize.yaml --wait --timeout 600",
    )(run)


def run(
    filename: Annotated[
        Path,
        typer.Option(
            "--filename", "-f", help="YAML file with one or more WorkflowRuns ('-' for stdin)."
        ),
    ],
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow the deploy until it succeeds or fails.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="With --wait: give up after this many seconds.")
    ] = 600.0,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Create or update WorkflowRuns from FILE (server-side apply), optionally waiting."""
    with exits.reported():
        documents = manifests.workflowruns(filename, manifests.read(filename), namespace=namespace)
    console = Console(highlight=False, soft_wrap=True)

    async def action(client: PlntClient) -> bool:
        succeeded = True
        for document in documents:
            applied = await applying.apply(client, document)
            name = applied.run["metadata"]["name"]
            typer.echo(f"{printing.GROUP_RESOURCE}/{name} {applied.verb}")
            if wait:
                succeeded = (
                    await _follow(client, applied.run, console, within=timeout) and succeeded
                )
        return succeeded

    if not connecting.call(connecting.Target(kubeconfig, context, namespace), action):
        raise typer.Exit(exits.Code.FAILED)


async def _follow(
    client: PlntClient, run: dict[str, Any], console: Console, *, within: float
) -> bool:
    name = str(run["metadata"]["name"])
    display = progress.display_for(console, name)
    try:
        result = await applying.follow(client, run, display, within=within)
    finally:
        display.close()
    if result.succeeded:
        typer.echo(f"{printing.GROUP_RESOURCE}/{name} ready: {result.message}")
    else:
        typer.echo(f"{printing.GROUP_RESOURCE}/{name} failed")
        typer.echo(f"error: {result.message}", err=True)
    return result.succeeded
