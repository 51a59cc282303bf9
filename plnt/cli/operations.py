"""`plnt scale`, `plnt rollback`, `plnt abort`, `plnt promote` and `plnt retry`: one
subresource call each; `plnt bench` (which follows a bench) lives in `bench`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from plnt.cli import bench, connecting, printing
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient

Name = Annotated[str, typer.Argument(help="The WorkflowRun's name.")]


def register(app: typer.Typer) -> None:
    """Add `scale`, `rollback`, `abort`, `promote`, `retry` and `bench` to `app`."""
    app.command("scale", epilog="Example: plnt scale summarize --replicas 3")(scale)
    app.command("rollback", epilog="Example: plnt rollback summarize --to-revision 2")(rollback)
    app.command("abort", epilog="Example: plnt abort summarize")(abort)
    app.command("promote", epilog="Example: plnt promote summarize")(promote)
    app.command("retry", epilog="Example: plnt retry summarize")(retry)
    bench.register(app)


def scale(
    name: Name,
    replicas: Annotated[int, typer.Option("--replicas", min=0, help="Desired runner replicas.")],
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Set the number of runner replicas (the scale subresource)."""

    async def action(client: PlntClient) -> dict[str, Any]:
        return await client.scale_workflowrun(name, replicas)

    connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    typer.echo(f"{printing.GROUP_RESOURCE}/{name} scaled")


def rollback(
    name: Name,
    to_revision: Annotated[
        int | None,
        typer.Option(
            "--to-revision", min=1, help="A revision from `plnt history` (default: the previous)."
        ),
    ] = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Deploy an earlier promoted revision again (the rollback subresource)."""

    async def action(client: PlntClient) -> dict[str, Any]:
        return await client.rollback(name, to_revision=to_revision)

    run = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    digest = printing.short_digest(((run.get("spec") or {}).get("workflow") or {}).get("digest"))
    which = f"revision {to_revision}" if to_revision is not None else "the previous revision"
    typer.echo(f"{printing.GROUP_RESOURCE}/{name} rolled back to {which} ({digest})")


def abort(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Cancel the deploy in progress; its compensation runs (the abort subresource)."""
    _steer(name, "abort", PlntClient.abort, connecting.Target(kubeconfig, context, namespace))


def promote(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """End the canary's pause now, so it is promoted (the promote subresource)."""
    _steer(name, "promote", PlntClient.promote, connecting.Target(kubeconfig, context, namespace))


def retry(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Try a failed deploy again now instead of after its backoff (the retry subresource)."""
    _steer(name, "retry", PlntClient.retry, connecting.Target(kubeconfig, context, namespace))


def _steer(
    name: str,
    verb: str,
    call: Callable[[PlntClient, str], Awaitable[dict[str, Any]]],
    target: connecting.Target,
) -> None:
    """One yes/no subresource call; prints the server's message."""

    async def action(client: PlntClient) -> dict[str, Any]:
        return await call(client, name)

    status = connecting.call(target, action)
    typer.echo(status.get("message") or f"{printing.GROUP_RESOURCE}/{name} {verb} requested")
