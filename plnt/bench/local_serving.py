"""What the benchmarks' own servers share: a stand-in served on a free loopback port, and a
child server that ends when the benchmark holding its stdin is gone.

A benchmark starts stand-ins (a scripted model, a tool, a slow backend) in its own process
and servers of its own (the bare handler, plnt's API server) as children; a child must not
outlive a benchmark that was killed, so it watches the pipe the benchmark holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def serving(
    app: web.Application, *, handler_cancellation: bool = False
) -> AsyncIterator[str]:
    """`app` on a free port of 127.0.0.1 while the block runs; yields its base URL."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=handler_cancellation)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def watch_stdin(stop: asyncio.Event) -> None:
    """Set `stop` once stdin closes (the benchmark that holds the pipe is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()
    stop.set()
