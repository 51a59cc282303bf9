"""The serve sequence every composition root runs: runner → site → ready, undone in reverse.

`plnt up` (`plnt.standalone.serving`) and `plnt serve` (`plnt.cluster.serving`) build the
application differently (their own PKI and policy, or the cluster's delegation) and then
serve it the same way: the application starts (its cleanup contexts: etcd, the watch
cache, the controllers), the socket listens, and the caller says it is ready while the
block runs. On exit the server stops accepting, open watches close, and the cleanup
contexts end in reverse. A start-up that fails is not undone here, as before: nothing
listened yet, and the process is about to exit with the reason.

Errors (`ServingError` and its two kinds, each one line): `StartupFailed` when the
application's start-up raised (storage did not answer), with the cause chained;
`CannotListen` when the address cannot be bound (in use, not this host's), naming the
address and the reason in words.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import AsyncIterator

from aiohttp import web

from plnt.apiserver import connections, keys


class ServingError(Exception):
    """The server did not start; the message says why in one line."""


class StartupFailed(ServingError):
    """The application's start-up (its cleanup contexts) raised; the cause is chained."""


class CannotListen(ServingError):
    """The address cannot be listened on."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"cannot listen on {address}: {reason}")
        self.address = address
        self.reason = reason


@contextlib.asynccontextmanager
async def listening(
    application: web.Application,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    shutdown_timeout: float,
    handler_cancellation: bool = False,
) -> AsyncIterator[str]:
    """Serve `application` (from `app.build_app`) over HTTPS on `host:port` while the block
    runs; yields the server's URL.

    An application built for one of a server's worker processes (`ServerSettings.worker`,
    `--workers N`) binds with `SO_REUSEPORT`, so that the N workers share the port and
    the kernel spreads new connections among them."""
    reuse_port = application[keys.SETTINGS].worker is not None
    runner = connections.app_runner(
        application, shutdown_timeout=shutdown_timeout, handler_cancellation=handler_cancellation
    )
    try:
        await runner.setup()
    except Exception as error:
        raise StartupFailed(str(error)) from error
    try:
        site = web.TCPSite(
            runner, host, port, ssl_context=ssl_context, reuse_port=reuse_port or None
        )
        try:
            await site.start()
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise CannotListen(f"{host}:{port}", reason.lower()) from error
        yield f"https://{host}:{port}"
    finally:
        await runner.cleanup()
