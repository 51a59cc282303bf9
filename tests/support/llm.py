"""A stand-in for an OpenAI-compatible inference server (vLLM, OpenAI).

A fake, because a real model server (vLLM on a GPU, or OpenAI itself) cannot run on these
machines: it stands in for the GPU inference server behind a PlntBackend. It speaks the
calls plnt makes of a backend: `GET /v1/models` (the placement probe), a probe's small
streamed chat call (header `X-Plnt-Probe`: counted in `probes` alone, answered after
`first_token_delay`, which delays the first token of every stream),
`POST /v1/chat/completions` (a model step, streamed or not), `POST /v1/completions` (a
completion step: the content is `"<prefix>: <prompt>"`), llama-cpp-python's
`POST /extras/tokenize/count` (its tokens, `{"count": N}`; 404 when `tokenizer` is off)
and, given a `load`, vLLM's
`GET /metrics` with its scheduler gauges `vllm:num_requests_running` and
`vllm:num_requests_waiting` (set `llm.load` to change them) and, given `kv_cache`, the
KV-cache gauge `vllm:gpu_cache_usage_perc`. It also answers as the neighbours a backend
may have: given `gpus`, a DCGM exporter's `GET /dcgm/metrics` (utilisation and framebuffer
per GPU, as `dcgm-exporter` names them); given `ollama_models`, ollama's `GET /api/ps`
(the models in memory, in ollama's shape, which has no request counts). With a `token`, the `/v1`
calls answer 401 without `Authorization: Bearer <token>`, as OpenAI does. A completion's
content is `"<prefix>: <last user message>"`, so a test can tell the answer came from
here. The Authorization headers it receives are kept in `seen`, the completion bodies in
`requests`.

Like vLLM it reports `usage` in tokens; its tokens are the reply's words with their leading
space (`"stand-in:"`, `" hello"`), and the prompt's tokens the words of every message. With
`stream: true` it answers Server-Sent Events as a streaming server does: one chunk per token,
`pace` seconds apart, then a `finish_reason` chunk, a usage chunk when
`stream_options.include_usage` asks for it (unless `stream_usage` is off: then, as
llama-cpp-python's server, it never sends one), and `data: [DONE]`. A test controls the pace
further with `hold_last`: while that event is unset the last token is not produced, so a
test can prove it received the first token before the last one existed. A stream whose
client goes away before `[DONE]` is counted in `cancelled` (and sets `cancelled_event`):
that is what an inference server sees when plnt stops a generation.

Two ways a stream is cut short, as servers do: with `interrupting`, as llama-cpp-python's
server with its default `interrupt_requests`, a stream ends with a bare `data: [DONE]`
(no `finish_reason`) at the first token after any other request arrived while it was
being sent (counted in `interrupted`); with `cut_after = N`, every stream ends that way
after N tokens.

`go_down_between_probes()` takes a `threaded_llm` down at a moment no probe straddles: the
next `GET /metrics` (the last request of a vLLM backend's probe) closes the listening socket
before it answers, and answers with `Connection: close`, so the probe it ends saw the
server up and every later one is refused a connection. A server stopped at an arbitrary
moment would, now and then, fail a probe half-way (its `/metrics` after its `/v1/models`
answered) or on a kept-alive connection the shutdown closed, each of which is another
status and another Event than a server that is simply down.

`serving_llm(token)` runs it in this event loop; `threaded_llm(token)` runs it on its own
loop in a thread, for synchronous tests that drive plnt through subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.api.headers import PROBE_HEADER


@dataclass
class LLM:
    """The running stand-in: its `/v1` base URL and the Authorization headers it saw."""

    url: str = ""
    seen: list[str] = field(default_factory=list)
    load: tuple[int, int] | None = None  # (running, waiting), as /metrics reports them
    kv_cache: float | None = None  # vllm:gpu_cache_usage_perc, 0..1
    gpus: list[Gpu] | None = None  # what /dcgm/metrics reports
    ollama_models: list[str] | None = None  # what /api/ps reports
    requests: list[dict[str, Any]] = field(default_factory=list)
    pace: float = 0.0  # seconds between streamed tokens
    hold_last: asyncio.Event | None = None  # the last token waits for it
    streams: int = 0
    cancelled: int = 0
    cancelled_event: asyncio.Event = field(default_factory=asyncio.Event)
    stream_usage: bool = True  # False: streams carry no usage, whatever the request asks
    tokenizer: bool = True  # False: /extras/tokenize/count answers 404
    tokenized: list[dict[str, Any]] = field(default_factory=list)  # its request bodies
    going_down: threading.Event = field(default_factory=threading.Event)  # see the docstring
    down: threading.Event = field(default_factory=threading.Event)  # the listener is closed
    close_listener: Callable[[], Awaitable[None]] | None = None  # set by `serving_llm`
    interrupting: bool = False  # a request arriving mid-stream ends the stream (docstring)
    interrupted: int = 0
    cut_after: int | None = None  # every stream ends after this many tokens (docstring)
    arrivals: int = 0  # requests that reached a /v1 or /extras handler
    first_token_delay: float = 0.0  # seconds before a stream's first token
    probes: int = 0  # backend probes' chat calls (X-Plnt-Probe), counted here only

    def go_down_between_probes(self, timeout: float = 30.0) -> None:
        """Close the listener right after the next probe's last request (module
        docstring); returns once it is closed. Only for a `threaded_llm` (another thread
        calls this)."""
        self.going_down.set()
        if not self.down.wait(timeout):
            raise AssertionError(f"no probe asked for /metrics within {timeout} s")

    @property
    def root(self) -> str:
        """The server's root URL (where /metrics, /dcgm/metrics and /api/ps live)."""
        return self.url.removesuffix("/v1")


@dataclass(frozen=True)
class Gpu:
    """One GPU as a DCGM exporter reports it: utilisation (%) and framebuffer (MiB)."""

    utilisation: float
    used_mib: float
    free_mib: float


def _metrics(load: tuple[int, int] | None, kv_cache: float | None) -> str:
    lines = []
    if load is not None:
        for name, value in zip(("running", "waiting"), load, strict=True):
            lines += [
                f"# HELP vllm:num_requests_{name} Number of requests {name}.",
                f"# TYPE vllm:num_requests_{name} gauge",
                f'vllm:num_requests_{name}{{model_name="stand-in"}} {float(value)}',
            ]
    if kv_cache is not None:
        lines += [
            "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            f'vllm:gpu_cache_usage_perc{{model_name="stand-in"}} {kv_cache}',
        ]
    return "\n".join(lines) + "\n"


_TOKENS = re.compile(r"\s*\S+|\s+")


def tokens_of(text: str) -> list[str]:
    """The stand-in's tokenisation: words with their leading whitespace."""
    return _TOKENS.findall(text)


def _usage(body: dict[str, Any], content: str) -> dict[str, int]:
    prompt = sum(len(tokens_of(str(m.get("content") or ""))) for m in body.get("messages", []))
    prompt += len(tokens_of(str(body.get("prompt") or "")))
    completion = len(tokens_of(content))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    if "prompt" in body:  # a text completion's chunk
        return {
            "id": "cmpl-stand-in",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model", "stand-in"),
            "choices": [{"index": 0, "text": delta.get("content", ""), "finish_reason": finish}],
        }
    return {
        "id": "chatcmpl-stand-in",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model", "stand-in"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _event(data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return f"data: {text}\n\n".encode()


def _dcgm(gpus: list[Gpu]) -> str:
    families = (
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "utilisation"),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "used_mib"),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "free_mib"),
    )
    lines = []
    for name, help_text, attribute in families:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for index, gpu in enumerate(gpus):
            labels = (
                f'gpu="{index}",UUID="GPU-stand-in-{index}",device="nvidia{index}",'
                'modelName="NVIDIA L4",Hostname="stand-in"'
            )
            lines.append(f"{name}{{{labels}}} {getattr(gpu, attribute)}")
    return "\n".join(lines) + "\n"


def _ps(models: list[str]) -> dict[str, object]:
    return {
        "models": [
            {
                "name": name,
                "model": name,
                "size": 6591830464,
                "digest": "0" * 64,
                "details": {"format": "gguf", "family": name.split(":")[0]},
                "expires_at": "2030-01-01T00:00:00Z",
                "size_vram": 5333539264,
                "context_length": 4096,
            }
            for name in models
        ]
    }


def _app(token: str | None, prefix: str, llm: LLM) -> web.Application:
    def authorized(request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        llm.seen.append(header)
        return token is None or header == f"Bearer {token}"

    async def metrics(request: web.Request) -> web.Response:
        if llm.load is None and llm.kv_cache is None:
            return web.Response(status=404, text="404: Not Found")
        response = web.Response(text=_metrics(llm.load, llm.kv_cache), content_type="text/plain")
        if llm.going_down.is_set() and not llm.down.is_set():
            assert llm.close_listener is not None
            await llm.close_listener()
            response.force_close()  # answered with `Connection: close`, never reused
            llm.down.set()
        return response

    async def dcgm(request: web.Request) -> web.Response:
        if llm.gpus is None:
            return web.Response(status=404, text="404: Not Found")
        return web.Response(text=_dcgm(llm.gpus), content_type="text/plain")

    async def ps(request: web.Request) -> web.Response:
        if llm.ollama_models is None:
            return web.Response(status=404, text="404 page not found")
        return web.json_response(_ps(llm.ollama_models))

    def refused() -> web.Response:
        error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
        return web.json_response({"error": error}, status=401)

    async def models(request: web.Request) -> web.Response:
        if not authorized(request):
            return refused()
        return web.json_response({"object": "list", "data": [{"id": "stand-in"}]})

    async def probe_stream(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """One token after `first_token_delay`, whatever holds or cuts the callers' streams."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(llm.first_token_delay)  # the model's own delay
        delta = {"role": "assistant", "content": "hi"}
        await response.write(_event(_chunk(body, delta, "stop")))
        await response.write(_event("[DONE]"))
        return response

    async def stream(
        request: web.Request, body: dict[str, Any], content: str
    ) -> web.StreamResponse:
        llm.streams += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        tokens = tokens_of(content)
        arrived = llm.arrivals
        try:
            for index, token in enumerate(tokens):
                cut = llm.cut_after is not None and index >= llm.cut_after
                if cut or (llm.interrupting and index and llm.arrivals != arrived):
                    llm.interrupted += 1
                    await response.write(_event("[DONE]"))
                    return response
                if not index and llm.first_token_delay:
                    await asyncio.sleep(llm.first_token_delay)  # the model's own delay
                if index == len(tokens) - 1 and llm.hold_last is not None:
                    await llm.hold_last.wait()
                elif index and llm.pace:
                    await asyncio.sleep(llm.pace)
                delta = {"content": token} if index else {"role": "assistant", "content": token}
                await response.write(_event(_chunk(body, delta, None)))
            await response.write(_event(_chunk(body, {}, "stop")))
            if llm.stream_usage and (body.get("stream_options") or {}).get("include_usage"):
                last = {**_chunk(body, {}, None), "choices": [], "usage": _usage(body, content)}
                await response.write(_event(last))
            await response.write(_event("[DONE]"))
        except (asyncio.CancelledError, ConnectionError):
            llm.cancelled += 1
            llm.cancelled_event.set()
            raise
        return response

    async def completions(request: web.Request) -> web.StreamResponse:
        probe = PROBE_HEADER in request.headers  # a prober's TTFT call: not the caller's
        llm.probes += probe
        llm.arrivals += not probe
        if not authorized(request):
            return refused()
        body = await request.json()
        if probe:
            return await probe_stream(request, body)
        llm.requests.append(body)
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = f"{prefix}: {users[-1]['content'] if users else ''}"
        if body.get("stream"):
            return await stream(request, body, content)
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
                "usage": _usage(body, content),
            }
        )

    async def text_completions(request: web.Request) -> web.StreamResponse:
        llm.arrivals += 1
        if not authorized(request):
            return refused()
        body = await request.json()
        llm.requests.append(body)
        content = f"{prefix}: {body.get('prompt', '')}"
        if body.get("stream"):
            return await stream(request, body, content)
        return web.json_response(
            {
                "id": "cmpl-stand-in",
                "object": "text_completion",
                "model": body.get("model", "stand-in"),
                "choices": [{"index": 0, "text": content, "finish_reason": "stop"}],
                "usage": _usage(body, content),
            }
        )

    async def tokenize_count(request: web.Request) -> web.Response:
        llm.arrivals += 1
        body = await request.json()
        llm.tokenized.append(body)  # asked, whether or not it answers
        if not llm.tokenizer:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response({"count": len(tokens_of(str(body.get("input", ""))))})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", text_completions)
    app.router.add_post("/extras/tokenize/count", tokenize_count)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/dcgm/metrics", dcgm)
    app.router.add_get("/api/ps", ps)
    return app


@contextlib.asynccontextmanager
async def serving_llm(
    token: str | None,
    *,
    prefix: str = "stand-in",
    load: tuple[int, int] | None = None,
    port: int | None = None,
) -> AsyncIterator[LLM]:
    """The stand-in on a free loopback port (or `port`, to start it again where an earlier
    one served), closed on exit."""
    llm = LLM(load=load)
    server = TestServer(_app(token, prefix, llm), host="127.0.0.1", port=port)
    await server.start_server()
    llm.url = str(server.make_url("/v1"))

    async def close_listener() -> None:
        assert server.runner is not None
        for site in list(server.runner.sites):
            await site.stop()  # closes the socket at once: new connections are refused

    llm.close_listener = close_listener
    try:
        yield llm
    finally:
        await server.close()


@contextlib.contextmanager
def threaded_llm(
    token: str | None,
    *,
    prefix: str = "stand-in",
    load: tuple[int, int] | None = None,
    port: int | None = None,
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
            async with serving_llm(token, prefix=prefix, load=load, port=port) as llm:
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
