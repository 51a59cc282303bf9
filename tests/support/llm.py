"""A stand-in for an OpenAI-compatible inference server (vLLM, OpenAI).

A fake, because a real model server (vLLM on a GPU, or OpenAI itself) cannot run on these
machines. It speaks the calls plnt makes of a backend: `GET /v1/models` (the placement
probe), `POST /v1/chat/completions` (a model step) and, given a `load`, vLLM's
`GET /metrics` with its scheduler gauges `vllm:num_requests_running` and
`vllm:num_requests_waiting` (set `llm.load` to change them). With a `token`, the `/v1`
calls answer 401 without `Authorization: Bearer <token>`, as OpenAI does. A completion's
content is `"<prefix>: <last user message>"`, so a test can tell the answer came from
here. The Authorization headers it receives are kept in `seen`.

`serving_llm(token)` runs it in this event loop; `threaded_llm(token)` runs it on its own
loop in a thread, for synchronous tests that drive plnt through subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer


@dataclass
class LLM:
    """The running stand-in: its `/v1` base URL and the Authorization headers it saw."""

    url: str = ""
    seen: list[str] = field(default_factory=list)
    load: tuple[int, int] | None = None  # (running, waiting), as /metrics reports them


def _metrics(load: tuple[int, int]) -> str:
    running, waiting = load
    lines = []
    for name, value in (("running", running), ("waiting", waiting)):
        lines += [
            f"# HELP vllm:num_requests_{name} Number of requests {name}.",
            f"# TYPE vllm:num_requests_{name} gauge",
            f'vllm:num_requests_{name}{{model_name="stand-in"}} {float(value)}',
        ]
    return "\n".join(lines) + "\n"


def _app(token: str | None, prefix: str, llm: LLM) -> web.Application:
    def authorized(request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        llm.seen.append(header)
        return token is None or header == f"Bearer {token}"

    async def metrics(request: web.Request) -> web.Response:
        if llm.load is None:
            return web.Response(status=404, text="404: Not Found")
        return web.Response(text=_metrics(llm.load), content_type="text/plain")

    def refused() -> web.Response:
        error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
        return web.json_response({"error": error}, status=401)

    async def models(request: web.Request) -> web.Response:
        if not authorized(request):
            return refused()
        return web.json_response({"object": "list", "data": [{"id": "stand-in"}]})

    async def completions(request: web.Request) -> web.Response:
        if not authorized(request):
            return refused()
        body = await request.json()
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = f"{prefix}: {users[-1]['content'] if users else ''}"
        return web.json_response(
            {
                "id": "chatcmpl-stand-in",
                "object": "chat.completion",
                "model": body.get("model", "stand-in"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/metrics", metrics)
    return app


@contextlib.asynccontextmanager
async def serving_llm(
    token: str | None, *, prefix: str = "stand-in", load: tuple[int, int] | None = None
) -> AsyncIterator[LLM]:
    """The stand-in on a free loopback port, closed on exit."""
    llm = LLM(load=load)
    server = TestServer(_app(token, prefix, llm), host="127.0.0.1")
    await server.start_server()
    llm.url = str(server.make_url("/v1"))
    try:
        yield llm
    finally:
        await server.close()


@contextlib.contextmanager
def threaded_llm(
    token: str | None, *, prefix: str = "stand-in", load: tuple[int, int] | None = None
) -> Iterator[LLM]:
    """`serving_llm` on its own event loop in a daemon thread, stopped on exit."""
    started = threading.Event()
    stop: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None
    holder: list[LLM] = []
    failure: list[BaseException] = []

    async def main() -> None:
        nonlocal stop, loop
        stop, loop = asyncio.Event(), asyncio.get_running_loop()
        try:
            async with serving_llm(token, prefix=prefix, load=load) as llm:
                holder.append(llm)
                started.set()
                await stop.wait()
        except BaseException as error:
            failure.append(error)
            started.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    if not started.wait(timeout=30) or failure:
        raise RuntimeError(f"the LLM stand-in did not start: {failure}")
    try:
        yield holder[0]
    finally:
        assert loop is not None and stop is not None
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
