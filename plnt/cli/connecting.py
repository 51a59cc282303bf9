"""What every API command shares: the global options, one client per call, one shell.

Commands declare `kubeconfig: KubeconfigOption = None, context: ContextOption = None,
namespace: NamespaceOption = None`, build a `Target` and hand `call` a coroutine
function of a `PlntClient`. `call` runs it, closes the client, and turns every
expected failure into `error: <message>` on stderr and its code from `exits`,
never a traceback. `show` is the whole of a read-only command: call, render, print.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from plnt.cli import exits
from plnt.client import PlntClient

T = TypeVar("T")

KubeconfigOption = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).",
        show_default=False,
    ),
]
ContextOption = Annotated[
    str | None, typer.Option("--context", help="Kubeconfig context (default: current-context).")
]
NamespaceOption = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="Namespace (default: the context's, else default)."),
]


@dataclass(frozen=True, slots=True)
class Target:
    """Where a command's requests go, from the global options."""

    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None

    def client(self) -> PlntClient:
        """A client for this target (raises `errors.KubeconfigError`)."""
        return PlntClient.from_kubeconfig(
            self.kubeconfig, context=self.context, namespace=self.namespace
        )


def call(target: Target, action: Callable[[PlntClient], Awaitable[T]]) -> T:
    """Run `action` with a client of `target`; expected failures exit with their code."""

    async def main() -> T:
        async with target.client() as client:
            return await action(client)

    with exits.reported():
        return asyncio.run(main())


def show(
    target: Target,
    action: Callable[[PlntClient], Awaitable[T]],
    render: Callable[[T], str | None],
) -> None:
    """Fetch with `action`, print `render`'s text; a None text was already reported by it."""
    text = render(call(target, action))
    if text is not None:
        typer.echo(text)
