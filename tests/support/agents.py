"""A scripted OpenAI-compatible backend and an HTTP calculator tool, for tool-loop tests.

`scripted_backend(script)` answers `POST /v1/chat/completions` and `POST /v1/completions`
with whatever `script(path, body)` returns: a chat message (`{"content": ..., "tool_calls":
[...]}`) or a completion's text (a str). Every request body is kept in `requests`, so a
test can see what the runner asked (the tools, the grammar, the tool results fed back).
Each answer reports usage (`prompt_tokens` 10, `completion_tokens` 5), so sums over turns
are checkable.

`AGENT` is a chat agent with the calculator's `add` tool, for tests of the loop and of
its trace.

`calculator()` serves `POST /add` (`{"a", "b"}` -> `{"sum": a + b}`), recording each call
and the most calls it had in flight at once (`peak`). With `overlap=N, calls=M` it holds
each answer until N calls are in flight at once or all M have arrived (the last wave may
be short), so concurrent calls do overlap; a caller that never sends N at once leaves
each held call to give up after `HOLD_SECONDS`, and `peak` says what it did. `POST /fail`
answers 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

Script = Callable[[str, dict[str, Any]], Any]
HOLD_SECONDS = 10.0
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@dataclass
class Scripted:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)


def chat_answer(
    content: str | None = None, calls: Sequence[tuple[str, Any]] = ()
) -> dict[str, Any]:
    """A chat message with `content` and tool calls `(name, arguments)`; arguments that are
    not a str are sent as their JSON."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for index, (name, arguments) in enumerate(calls)
        ]
    return message


@contextlib.asynccontextmanager
async def scripted_backend(script: Script) -> AsyncIterator[Scripted]:
    state = Scripted()

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        state.requests.append(body)
        message = script("chat", body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return web.json_response(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": USAGE,
            }
        )

    async def complete(request: web.Request) -> web.Response:
        body = await request.json()
        state.requests.append(body)
        text = script("completion", body)
        return web.json_response(
            {
                "id": "cmpl-scripted",
                "object": "text_completion",
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": USAGE,
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", complete)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    state.url = str(server.make_url("/v1"))
    try:
        yield state
    finally:
        await server.close()


@dataclass
class Calculator:
    url: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0


@contextlib.asynccontextmanager
async def calculator(*, overlap: int = 0, calls: int = 0) -> AsyncIterator[Calculator]:
    state = Calculator()
    wave = asyncio.Event()  # set when the calls held now may answer
    wave.set()

    async def add(request: web.Request) -> web.Response:
        nonlocal wave
        body = await request.json()
        state.calls.append(body)
        state.in_flight += 1
        state.peak = max(state.peak, state.in_flight)
        held = wave
        if held.is_set():
            held = wave = asyncio.Event()
        if state.in_flight >= overlap or len(state.calls) >= calls:
            held.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held.wait(), HOLD_SECONDS)
            return web.json_response({"sum": body["a"] + body["b"]})
        finally:
            state.in_flight -= 1

    async def fail(request: web.Request) -> web.Response:
        state.calls.append(await request.json())
        return web.json_response({"error": "down"}, status=500)

    app = web.Application()
    app.router.add_post("/add", add)
    app.router.add_post("/fail", fail)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    state.url = str(server.make_url("")).rstrip("/")
    try:
        yield state
    finally:
        await server.close()


AGENT = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: adder}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
tools:
  - name: add
    description: Adds two integers.
    idempotent: true
    parameters:
      type: object
      properties: {a: {type: integer}, b: {type: integer}}
      required: [a, b]
    http: {url: "TOOL/add"}
  - name: broken
    description: Always fails.
    http: {url: "TOOL/fail"}
steps:
  - id: solve
    kind: model
    MODE
    prompt: "{{ inputs.q }}"
    tools: [add, broken]
    maxTurns: 3
    maxParallelToolCalls: 2
    cache: false
output: steps.solve.output
"""
