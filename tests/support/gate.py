"""A real HTTP target that lets a test decide when a workflow's `http` step finishes.

`serving_gate()` serves `GET /hold` (answers only once `release` is set; `arrived` is set
when a request comes in) and `GET /broken` (always 500) on a free loopback port. It also
stands in for a runner whose invocations hang: `POST /invoke` holds the same way, then
answers `{"output": "held", ...}` in the runner's envelope.
`gated_workflow(url)` is a two-step spec: a transform, then an `http` step calling `url`.
`threaded_gate()` serves the same on its own loop in a thread, for synchronous tests that
drive plnt through child processes: it counts arrivals, so a test can wait until N calls
are held, and releases them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer

Gate = tuple[str, asyncio.Event, asyncio.Event]


@contextlib.asynccontextmanager
async def serving_gate(on_arrival: Callable[[], None] | None = None) -> AsyncIterator[Gate]:
    """(base URL, arrived, release); the server is closed (and every hold released) on exit.

    `on_arrival` is called as each held request comes in."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold(request: web.Request) -> web.Response:
        arrived.set()
        if on_arrival is not None:
            on_arrival()
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


@dataclass
class ThreadedGate:
    """A gate served on its own thread: its URL, how many calls it holds, their release."""

    url: str = ""
    arrivals: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _release: Callable[[], None] = lambda: None

    def arrived(self) -> None:
        with self._changed:
            self.arrivals += 1
            self._changed.notify_all()

    def wait_for_arrivals(self, count: int, *, timeout: float = 60.0) -> None:
        """Block until `count` calls have come in (AssertionError past `timeout`)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.arrivals >= count, timeout):
                raise AssertionError(f"{self.arrivals} calls reached the gate, not {count}")

    def release(self) -> None:
        """Let every held call (and every later one) through."""
        self._release()


@contextlib.contextmanager
def threaded_gate() -> Iterator[ThreadedGate]:
    """`serving_gate` on its own event loop in a daemon thread, closed on exit."""
    gate = ThreadedGate()
    started = threading.Event()
    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        try:
            async with serving_gate(gate.arrived) as (url, _, release):
                loop, stop = asyncio.get_running_loop(), asyncio.Event()
                gate.url = url
                gate._release = lambda: loop.call_soon_threadsafe(release.set)
                stopping.append((loop, stop))
                started.set()
                await stop.wait()
        finally:
            started.set()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="gate", daemon=True)
    thread.start()
    if not started.wait(timeout=30) or not stopping:
        raise RuntimeError("the gate did not start")
    try:
        yield gate
    finally:
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
