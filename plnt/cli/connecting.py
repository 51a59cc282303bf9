"""What every API command shares: the global options, one client per call, exit codes.

Commands declare `kubeconfig: KubeconfigOption = None, context: ContextOption = None,
namespace: NamespaceOption = None`, build a `Target` and hand `call` a coroutine
function of a `PlntClient`. `call` runs it, closes the client, and turns every
expected failure into `error: <message>` on stderr and an exit code, never a
traceback:

    0  success                         4  conflict (409)
    1  other and server errors         5  unauthorized or forbidden (401, 403)
    2  usage errors                    6  invalid (422)
    3  not found (404)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer

from plnt.client import PlntClient, errors

T = TypeVar("T")

EXIT_OTHER = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_DENIED = 5
EXIT_INVALID = 6
EXIT_INTERRUPTED = 130

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


def exit_code(error: errors.ClientError) -> int:
    """The documented exit code of a client failure."""
    if isinstance(error, errors.NotFound):
        return EXIT_NOT_FOUND
    if isinstance(error, errors.Conflict):
        return EXIT_CONFLICT
    if isinstance(error, errors.Unauthorized | errors.Forbidden):
        return EXIT_DENIED
    if isinstance(error, errors.Invalid):
        return EXIT_INVALID
    return EXIT_OTHER


def fail(message: str, code: int = EXIT_OTHER) -> NoReturn:
    """Print `error: message` on stderr and exit with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def call(target: Target, action: Callable[[PlntClient], Awaitable[T]]) -> T:
    """Run `action` with a client of `target`; expected failures exit with their code."""

    async def main() -> T:
        async with target.client() as client:
            return await action(client)

    try:
        return asyncio.run(main())
    except errors.ClientError as error:
        message = error.message if isinstance(error, errors.ApiError) else str(error)
        fail(message, exit_code(error))
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
