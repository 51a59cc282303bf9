"""The wire formats of streamed answers, and the one writer both use.

`/invoke?stream=true` (or `Accept: application/x-ndjson`) answers newline-delimited JSON,
written as things happen. Steps report from their own tasks through synchronous listeners,
so `Writer` puts each encoded piece on a queue and one writer task sends them in order: a
slow client delays the lines, never the workflow. Lines:

    {"type": "step", "step": {...trace entry..., "error": {...} only when the step failed}}
        (with `"output": ...` beside `step` when the envelope asked for `stepOutputs`)
    {"type": "delta", "step": "ID", "content": "..."}   pieces of the output step's reply
    {"type": "result", ...the body POST /invoke answers...}             exactly one last line,
    {"type": "error", "error": {...runner error body...}, "status": N}   or this one

`/v1/chat/completions` with `stream: true` answers Server-Sent Events (`sse_event`) in
OpenAI's chunk format through the same writer.

A client that goes away mid-stream ends the invocation: aiohttp cancels the handler (the
runner serves with handler cancellation), which cancels the steps and closes the backend
connections they hold. A write that fails first only stops the writing. Errors: none of
its own; a lost connection is swallowed here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from plnt.runner import errors, executing, responses

NDJSON = "application/x-ndjson"
EVENT_STREAM = "text/event-stream"
_TRUE = frozenset({"true", "1", "yes"})


def wants_stream(request: web.Request) -> bool:
    """True for `?stream=true` (or 1/yes) or an Accept header naming NDJSON."""
    if request.query.get("stream", "").lower() in _TRUE:
        return True
    return NDJSON in request.headers.get("Accept", "")


def step_line(
    trace: executing.StepTrace, error: errors.RunnerError | None, *, with_output: bool = False
) -> dict[str, Any]:
    """The line for one finished step; a failed step carries the runner's error detail, a
    step that succeeded its output when `with_output` (the envelope's `stepOutputs`)."""
    entry = trace.to_json()
    if error is not None:
        entry["error"] = responses.error_body(error)["error"]
    line: dict[str, Any] = {"type": "step", "step": entry}
    if with_output and error is None:
        line["output"] = trace.output
    return line


def delta_line(step: str, content: str) -> dict[str, Any]:
    """The line for one piece of the output step's reply."""
    return {"type": "delta", "step": step, "content": content}


def result_line(body: dict[str, Any]) -> dict[str, Any]:
    """The last line of a successful stream: the /invoke answer, tagged."""
    return {"type": "result", **body}


def error_line(error: errors.RunnerError) -> dict[str, Any]:
    """The last line of a stream whose invocation failed after streaming began."""
    return {"type": "error", **responses.error_body(error), "status": error.status}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode(line: dict[str, Any]) -> bytes:
    """One NDJSON line (compact, UTF-8, newline-terminated)."""
    return _compact(line).encode() + b"\n"


def sse_event(data: dict[str, Any] | str) -> bytes:
    """One Server-Sent Event carrying `data` (JSON, or a literal such as `[DONE]`)."""
    text = data if isinstance(data, str) else _compact(data)
    return f"data: {text}\n\n".encode()


class Writer:
    """Sends queued bytes on a prepared response from one task, in order.

    `send` and `send_bytes` are synchronous (they may be called from a step listener).
    Leaving `async with Writer(response) as writer:` sends what is queued, then ends the
    body if the response was prepared (nothing is written to an unprepared one).
    """

    def __init__(self, response: web.StreamResponse) -> None:
        self._response = response
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.connected = True

    async def __aenter__(self) -> Writer:
        self._task = asyncio.create_task(self._drain())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._queue.put_nowait(None)
        assert self._task is not None
        try:
            await self._task
        finally:
            if self.connected and self._response.prepared:
                with contextlib.suppress(ConnectionError):
                    await self._response.write_eof()

    def send(self, line: dict[str, Any]) -> None:
        """Queue one NDJSON line."""
        self._queue.put_nowait(encode(line))

    def send_bytes(self, data: bytes) -> None:
        """Queue bytes already encoded (an SSE event)."""
        self._queue.put_nowait(data)

    async def _drain(self) -> None:
        while (data := await self._queue.get()) is not None:
            if not self.connected:
                continue
            try:
                await self._response.write(data)
            except ConnectionError:
                self.connected = False
