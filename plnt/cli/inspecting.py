"""`plnt status`, `plnt timeline` and `plnt history`: what a WorkflowRun's status says.

The three share one shell (`_inspect`): resolve the target from the global
options, get the run (and its Events when the report shows them), then print
the report from `reports` or fail with the documented exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from plnt.cli import connecting, reports
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient

Name = Annotated[str, typer.Argument(help="The WorkflowRun's name.")]
Run = dict[str, Any]
Events = list[dict[str, Any]]


def register(app: typer.Typer) -> None:
    """Add `status`, `timeline` and `history` to `app`."""
    app.command("status", epilog="Example: plnt status summarize -n team-a")(status)
    app.command("timeline", epilog="Example: plnt timeline summarize")(timeline)
    app.command("history", epilog="Example: plnt history summarize")(history)


def _inspect(
    target: connecting.Target,
    name: str,
    render: Callable[[Run, Events], str | None],
    *,
    events: bool,
) -> None:
    async def fetch(client: PlntClient) -> tuple[Run, Events]:
        run = await client.get_workflowrun(name)
        return run, (await client.events_for(name) if events else [])

    connecting.show(target, fetch, lambda found: render(*found))


def status(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Phase, promoted revision, replicas, conditions, saga steps and recent events."""
    target = connecting.Target(kubeconfig, context, namespace)
    _inspect(target, name, reports.status_text, events=True)


def timeline(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Saga steps (state, attempts, duration, message) and events, oldest first."""
    target = connecting.Target(kubeconfig, context, namespace)
    _inspect(target, name, reports.timeline_text, events=True)


def history(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Promoted revisions: revision, digest, backend, promoted at, reason."""

    def render(run: Run, _: Events) -> str | None:
        text = reports.history_text(run)
        if text is None:
            typer.echo(f"No revisions promoted yet for {name}.", err=True)
        return text

    _inspect(connecting.Target(kubeconfig, context, namespace), name, render, events=False)
