"""Running the UI server for one launch: bind loopback, serve until interrupted.

The socket is bound before the app is built, so the port (a free one unless asked)
is known to the `Host` check and to the URL printed, with no window for another
process to take it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Callable

from aiohttp import web

from plnt.client import PlntClient
from plnt.ui import app as ui_app
from plnt.ui.settings import UiSettings


def url_of(settings: UiSettings) -> str:
    """The address to open: it carries the launch's token."""
    return f"http://{settings.host}:{settings.port}/?token={settings.token}"


def bind(settings: UiSettings) -> tuple[socket.socket, UiSettings]:
    """A listening socket on the settings' loopback port, and the settings with its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock, dataclasses.replace(settings, port=sock.getsockname()[1])


async def serve(settings: UiSettings, *, on_ready: Callable[[UiSettings], None]) -> None:
    """Serve until cancelled; `on_ready` gets the settings with the bound port.

    The client is made first, so a kubeconfig that cannot be used fails before anything
    listens (`plnt.client.KubeconfigError`).
    """
    client = PlntClient.from_kubeconfig(
        settings.kubeconfig, context=settings.context, namespace=settings.namespace
    )
    sock, bound = bind(settings)
    runner = web.AppRunner(ui_app.build_app(bound, client), handle_signals=False)
    await runner.setup()
    try:
        await web.SockSite(runner, sock, shutdown_timeout=1.0).start()
        on_ready(bound)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        sock.close()
