"""A bare aiohttp proxy: the floor under the API server's invoke proxy.

It forwards `POST /invoke` to one upstream runner over a pooled plain-HTTP session and
answers the runner's status and body: no TLS, no authentication, no authorization, no
reading of the WorkflowRun, no balancing, no log. The deploy saga benchmark measures it
beside the API server, so the report can tell the cost of any Python HTTP hop on the
machine from the cost of what plnt adds to it.

    python -m plnt.bench.bareproxy --upstream http://127.0.0.1:PORT --port 0

prints `bare proxy listening on http://127.0.0.1:PORT` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

UPSTREAM: web.AppKey[str] = web.AppKey("upstream", str)
SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


async def _session(app: web.Application) -> AsyncIterator[None]:
    app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app[SESSION].close()


async def _invoke(request: web.Request) -> web.Response:
    body = await request.read()
    async with request.app[SESSION].post(
        request.app[UPSTREAM], data=body, headers={"Content-Type": "application/json"}
    ) as upstream:
        answer = await upstream.read()
        return web.Response(status=upstream.status, body=answer, content_type="application/json")


def build_app(upstream: str) -> web.Application:
    """The proxy app forwarding `POST /invoke` to `{upstream}/invoke`."""
    app = web.Application()
    app[UPSTREAM] = f"{upstream.rstrip('/')}/invoke"
    app.cleanup_ctx.append(_session)
    app.router.add_post("/invoke", _invoke)
    return app


async def _serve(upstream: str, port: int) -> None:
    runner = web.AppRunner(build_app(upstream), access_log=None)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        host, bound = runner.addresses[0][:2]
        print(f"bare proxy listening on http://{host}:{bound}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--upstream", required=True, help="base URL of the runner")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks one")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.upstream, args.port))


if __name__ == "__main__":
    main()
