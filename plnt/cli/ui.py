"""`plnt ui` (and `kubectl plnt ui`): the browser UI, served on loopback with the user's kubeconfig.

Prints the URL (it carries the launch's token) and opens it in the browser unless
`--no-browser`; serves until Ctrl-C. The server is a client of plnt like every other
command: the same `--kubeconfig`, `--context` and `--namespace`, the user's own RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
import webbrowser
from typing import TYPE_CHECKING, Annotated

import typer

from plnt.cli import exits
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption

if TYPE_CHECKING:
    from plnt.ui.settings import UiSettings


def register(app: typer.Typer) -> None:
    """Add `ui` to `app`."""
    app.command("ui", epilog="Example: plnt ui --context plnt")(ui)


def ui(
    port: Annotated[
        int, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")
    ] = 0,
    browser: Annotated[
        bool, typer.Option("--browser/--no-browser", help="Open the UI in the default browser.")
    ] = True,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout", help="Seconds the invoke form and chat wait for an answer."
        ),
    ] = 300.0,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Serve the browser UI (runs, deploy timeline, backends, invocations, invoke) until Ctrl-C."""
    from plnt.ui import serving
    from plnt.ui.settings import UiSettings

    def ready(bound: UiSettings) -> None:
        url = serving.url_of(bound)
        typer.echo(f"plnt UI at {url}  (Ctrl-C stops it)")
        if browser:
            webbrowser.open(url)

    settings = UiSettings(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        port=port,
        invoke_timeout_seconds=request_timeout,
    )
    with exits.reported(), contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(serving.serve(settings, on_ready=ready))
        except OSError as error:
            exits.fail(f"cannot listen on 127.0.0.1:{port}: {error.strerror}", exits.Code.USAGE)
