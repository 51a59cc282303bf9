"""A real HTTP target that lets a test decide when a workflow's `http` step finishes.

`serving_gate()` serves `GET /hold` (answers only once `release` is set; `arrived` is set
when a request comes in) and `GET /broken` (always 500) on a free loopback port. It also
stands in for a runner whose invocations hang: `POST /invoke` holds the same way, then
answers `{"output": "held", ...}` in the runner's envelope.
`gated_workflow(url)` is a two-step spec: a transform, then an `http` step calling `url`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.test_utils import TestServer

Gate = tuple[str, asyncio.Event, asyncio.Event]


@contextlib.asynccontextmanager
async def serving_gate() -> AsyncIterator[Gate]:
    """(base URL, arrived, release); the server is closed (and every hold released) on exit."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold(request: web.Request) -> web.Response:
        arrived.set()
        await release.wait()
        return web.json_response({"opened": True})

    async def invoke(request: web.Request) -> web.Response:
        await hold(request)
        return web.json_response({"output": "held", "cache": {"hits": 0, "misses": 0}})

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    app = web.Application()
    app.router.add_get("/hold", hold)
    app.router.add_get("/broken", broken)
    app.router.add_post("/invoke", invoke)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), arrived, release
    finally:
        release.set()
        await server.close()


def gated_workflow(url: str) -> str:
    """A spec whose second step is `GET url` (the first greets `inputs.who`)."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: gated}}
inputs: {{type: object, properties: {{who: {{type: string}}}}, required: [who]}}
steps:
  - {{id: greet, kind: transform, template: "hello {{{{ inputs.who }}}}"}}
  - {{id: call, kind: http, needs: [greet], url: "{url}", retries: 0, timeoutSeconds: 30}}
output: '[steps.greet.output, steps.call.output]'
"""
