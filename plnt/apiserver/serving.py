"""The serve sequence every API server process runs, written once.

`plnt up` (`plnt.standalone.serving`), `plnt serve` (`plnt.cluster.serving`), a sibling
API process of either (`plnt.standalone.apiprocess`, or `plnt serve` again) and the API
server benchmark's server child (`plnt.bench.apiserver_serving`) build the application
differently (their own PKI and policy, or the cluster's delegation) and then serve it
the same way, `serve`:

1. **listen** (`listening`): the application starts (its cleanup contexts: etcd, the
   watch cache, the controllers), then the socket listens;
2. **start siblings**: with `--workers N`, process 0 starts processes 1..N-1 on the same
   port, each ready before this goes on (`plnt.processes.apiprocesses.running_siblings`,
   the one way siblings start);
3. **announce ready**: the composition's own readiness (`Ready`: a kubeconfig written,
   the deploy worker started, the ready line printed), then a sibling tells process 0
   it listens;
4. **register restarts**: `plnt_child_restarts_total` over every supervisor the process
   holds (the composition's children and the siblings), when it holds any;
5. **wait** until `stop` is set;
6. **stop in reverse**: whatever `Ready` started, the siblings (reaped), the listener
   (open watches close), the cleanup contexts.

A start-up that fails after listening is undone as far as it got; one whose application
start-up raised is not (nothing listened yet), and the process is about to exit with
the reason either way.

Errors (`ServingError` and its kinds, each one line): `StartupFailed` when the
application's start-up raised (storage did not answer), with the cause chained;
`CannotListen` when the address cannot be bound (in use, not this host's), naming the
address and the reason in words; `plnt.processes.apiprocesses.SiblingFailed` when a
sibling exits or does not listen in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from aiohttp import web

from plnt.apiserver import connections, keys
from plnt.processes import apiprocesses
from plnt.processes.restarts import ChildRestarts
from plnt.processes.supervision import Supervisor

Ready = Callable[[str, contextlib.AsyncExitStack], Awaitable[None]]
"""What a composition does once its server (and any siblings) listen, given the server's
URL: write what clients read, start what needs the API, say it is ready. What it enters
on the stack stops first, before the siblings and the listener."""


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

    An application built for one of a server's API processes (`ServerSettings.slot`,
    `--workers N`) binds with `SO_REUSEPORT`, so that the N processes share the port and
    the kernel spreads new connections among them."""
    reuse_port = application[keys.SETTINGS].slot is not None
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


async def serve(
    application: web.Application,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    shutdown_timeout: float,
    stop: asyncio.Event,
    handler_cancellation: bool = False,
    sibling_argv: Sequence[str] | None = None,
    supervisors: Sequence[Supervisor] = (),
    ready: Ready | None = None,
) -> None:
    """Serve `application` until `stop` is set: listen, start the siblings, announce
    ready, register restarts, wait, then stop everything in reverse. Siblings start only
    once this process listens (a sibling that cannot bind would fail the start anyway)
    and before the ready line, so a client that read it finds every process serving.

    The application's `ServerSettings.slot` says which API process this is: process 0 of
    N starts processes 1..N-1 as `sibling_argv` (required then), each told its slot; a
    sibling starts none and tells process 0 once it is ready. `supervisors` are the
    composition's own supervised children, counted with the siblings in
    `plnt_child_restarts_total`."""
    slot = application[keys.SETTINGS].slot
    first_of_several = slot is not None and not slot.is_sibling and slot.count > 1
    if first_of_several and sibling_argv is None:
        raise ValueError("process 0 of several API processes needs its siblings' argv")
    async with contextlib.AsyncExitStack() as parts:
        server = await parts.enter_async_context(
            listening(
                application,
                host=host,
                port=port,
                ssl_context=ssl_context,
                shutdown_timeout=shutdown_timeout,
                handler_cancellation=handler_cancellation,
            )
        )
        restarts = list(supervisors)
        if first_of_several:
            assert slot is not None and sibling_argv is not None
            restarts += await parts.enter_async_context(
                apiprocesses.running_siblings(sibling_argv, slot)
            )
        if ready is not None:
            await ready(server, parts)
        if slot is not None and slot.is_sibling:
            apiprocesses.announce_ready(slot)
        if restarts:  # no await since the ready line: no scrape after it misses them
            application[keys.METRICS].registry.register(ChildRestarts(restarts))
        await stop.wait()
