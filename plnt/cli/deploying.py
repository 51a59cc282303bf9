"""`plnt run -f FILE [--wait]`: create or update WorkflowRuns by server-side apply, then follow.

Applying (field manager `plnt`, conflicts forced) makes `plnt run` idempotent and
lets it share objects with `kubectl apply --server-side`. With `--wait` the
command watches each applied run (`fieldSelector=metadata.name=NAME`, resuming
from the last resourceVersion seen, re-reading the object if the watch expires)
and shows its saga steps until `progress.outcome` says the deploy of the applied
generation is over. A failed deploy prints the Ready/Degraded message and exits 1.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console

from plnt.cli import connecting, printing, progress
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient, errors

WATCH_SECONDS = 300


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
    documents = _load(filename, namespace)
    target = connecting.Target(kubeconfig, context, namespace)
    console = Console(highlight=False, soft_wrap=True)

    async def action(client: PlntClient) -> bool:
        succeeded = True
        for document in documents:
            applied = await _apply(client, document)
            if wait:
                succeeded = await _follow(client, applied, console, within=timeout) and succeeded
        return succeeded

    if not connecting.call(target, action):
        raise typer.Exit(connecting.EXIT_OTHER)


def _load(filename: Path, namespace: str | None) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if str(filename) == "-" else filename.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        connecting.fail(f"{filename}: {getattr(error, 'strerror', None) or error}", 2)
    try:
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        connecting.fail(f"{filename}: not valid YAML: {error}", connecting.EXIT_USAGE)
    if not loaded:
        connecting.fail(f"{filename}: no objects found", connecting.EXIT_USAGE)
    for index, document in enumerate(loaded, start=1):
        if not isinstance(document, dict) or document.get("kind") != "WorkflowRun":
            kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
            connecting.fail(
                f"{filename}: document {index} is a {kind}, not a WorkflowRun",
                connecting.EXIT_USAGE,
            )
        declared = (document.get("metadata") or {}).get("namespace")
        if namespace and declared and declared != namespace:
            connecting.fail(
                f'{filename}: the namespace from the provided object "{declared}" does not '
                f'match the namespace "{namespace}"; you must pass the same namespace',
                connecting.EXIT_USAGE,
            )
    return loaded


async def _apply(client: PlntClient, document: dict[str, Any]) -> dict[str, Any]:
    name = str((document.get("metadata") or {}).get("name") or "")
    if not name:
        raise errors.Invalid("WorkflowRun: metadata.name is required", code=422, reason="Invalid")
    ns = (document.get("metadata") or {}).get("namespace") or None
    try:
        before: dict[str, Any] | None = await client.get_workflowrun(name, namespace=ns)
    except errors.NotFound:
        before = None
    applied = await client.apply_workflowrun(document, namespace=ns)
    if before is None:
        verb = "created"
    elif before["metadata"].get("resourceVersion") == applied["metadata"].get("resourceVersion"):
        verb = "unchanged"
    else:
        verb = "configured"
    typer.echo(f"{printing.GROUP_RESOURCE}/{name} {verb}")
    return applied


async def _follow(
    client: PlntClient, applied: dict[str, Any], console: Console, *, within: float
) -> bool:
    meta = applied["metadata"]
    name, generation = meta["name"], int(meta.get("generation") or 1)
    display = progress.display_for(console, name)
    try:
        async with asyncio.timeout(within):
            result = await _until_outcome(client, applied, display, generation=generation)
    except TimeoutError:
        result = progress.Outcome(
            False, f"timed out after {within:g}s waiting for generation {generation}"
        )
    finally:
        display.close()
    if result.succeeded:
        typer.echo(f"{printing.GROUP_RESOURCE}/{name} ready: {result.message}")
    else:
        typer.echo(f"{printing.GROUP_RESOURCE}/{name} failed")
        typer.echo(f"error: {result.message}", err=True)
    return result.succeeded


async def _until_outcome(
    client: PlntClient,
    current: dict[str, Any],
    display: progress.Display,
    *,
    generation: int,
) -> progress.Outcome:
    meta = current["metadata"]
    name, ns = meta["name"], meta.get("namespace")
    while True:
        display.update(current)
        done = progress.outcome(current, generation)
        if done is not None:
            return done
        version = current["metadata"].get("resourceVersion")
        try:
            async for event in client.watch_workflowrun(
                name, namespace=ns, resource_version=version, timeout_seconds=WATCH_SECONDS
            ):
                if event.type == "BOOKMARK":
                    current["metadata"]["resourceVersion"] = event.object["metadata"].get(
                        "resourceVersion", version
                    )
                    continue
                if event.type == "DELETED":
                    return progress.Outcome(False, "the WorkflowRun was deleted")
                current = event.object
                display.update(current)
                done = progress.outcome(current, generation)
                if done is not None:
                    return done
        except errors.Gone:
            current = await client.get_workflowrun(name, namespace=ns)
