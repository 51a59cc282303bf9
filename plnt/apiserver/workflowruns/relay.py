"""Streams passing through the API server: NDJSON invocations and Server-Sent Events.

The runner answers a streamed `/invoke` with NDJSON (one line per step, `delta` lines with the
output step's tokens, a last `result` or `error` line) and a streamed chat completion with
SSE (`data:` events, `data: [DONE]` last). The API server copies either stream chunk by
chunk as it arrives, never buffering it whole, and parses nothing but:

* the last complete line, which says how the stream ended (for the invocation log): an
  NDJSON `result` is 200, an NDJSON `error` line its `status`; an SSE `[DONE]` is 200, an SSE
  error event its `code` when that is an HTTP status (502 otherwise);
* the moment the first token passes, for the log's time to first token: the first chunk of an
  SSE stream (the runner sends its first event with the first token), the first chunk
  holding a `"type":"delta"` line of an NDJSON stream;
* the moment each later chunk carrying tokens passes, for the time between output tokens
  (`Outcome.token_gaps`, each chunk's gap shared evenly by the tokens it carries: NDJSON
  `delta` lines, SSE events with a `content` or `text`; the finish and usage events
  carry none);
* the invocation's `usage` for the log (`plnt.api.usage`, with its source): the NDJSON
  `result` line's, or the last SSE event holding a `"usage"` key (the usage chunk the
  runner sends before `[DONE]` when the client asked for it).

A failure after the stream began cannot change the HTTP status any more, so it becomes the
stream's last line, in the stream's own error shape (an NDJSON `error` line, or an SSE
`{"error": {...}}` event that the OpenAI SDK raises). Errors: none of its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from plnt.api import codec
from plnt.api.headers import CacheOutcome
from plnt.api.usage import Usage

NDJSON = "application/x-ndjson"
EVENT_STREAM = "text/event-stream"
CLIENT_CLOSED = 499  # nginx's convention for "the caller went away first"
_DELTA = b'"type":"delta"'
_CONTENT = (b'"content"', b'"text"')  # a chat or text completion chunk carrying output
_USAGE = b'"usage"'


def wants_stream(request: web.Request) -> bool:
    """`?stream=true` (or 1/yes) or an Accept header naming NDJSON."""
    if request.query.get("stream", "").lower() in ("true", "1", "yes"):
        return True
    return NDJSON in request.headers.get("Accept", "")


def is_stream(media: str) -> bool:
    """Whether a Content-Type is one of the streams relayed chunk by chunk."""
    return media.startswith((NDJSON, EVENT_STREAM))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a relayed stream ended: its status, cache outcome, first-token moment, usage."""

    status: int
    cache: CacheOutcome = CacheOutcome.OFF
    first_token_at: float | None = None
    usage: Usage | None = None
    output: object = None
    """An NDJSON `result` line's output (for shadow traffic's pairs)."""
    last_token_at: float | None = None
    token_gaps: tuple[float, ...] = ()
    """Seconds between successive output tokens after the first (see the module docstring)."""

    def per_token_seconds(self) -> float | None:
        """The call's mean time per output token after the first (None with fewer than two:
        from `usage`'s completion tokens when it carries them, else the tokens seen)."""
        if self.first_token_at is None or self.last_token_at is None:
            return None
        tokens = self.usage.completion_tokens if self.usage is not None else 0
        tokens = tokens if tokens > len(self.token_gaps) else len(self.token_gaps) + 1
        if tokens < 2:
            return None
        return (self.last_token_at - self.first_token_at) / (tokens - 1)


class CoalescedStreamResponse(web.StreamResponse):
    """A stream response whose headers leave with its first chunk, in one write.

    aiohttp's `StreamResponse` sends the status line and headers on their own when the
    response is prepared, so a relayed stream cost one more TLS record, `send` and
    client wake-up before its first token could. Until the first chunk comes there is
    nothing a caller can act on, so the headers wait for it (a stream that ends with no
    chunk sends them with its end). aiohttp's buffered `Response` does the same through
    this class attribute.
    """

    _send_headers_immediately = False


class _LastLine:
    """Remembers the last complete line of a byte stream passing through (not the stream),
    and the last complete line holding `marker`, when one is given."""

    def __init__(self, marker: bytes | None = None) -> None:
        self._partial = bytearray()
        self._marker = marker
        self.last = b""
        self.marked = b""

    def feed(self, chunk: bytes) -> None:
        self._partial += chunk
        end = self._partial.rfind(b"\n")
        if end < 0:
            return
        if self._marker is not None and (at := self._partial.rfind(self._marker, 0, end)) >= 0:
            start = self._partial.rfind(b"\n", 0, at) + 1
            self.marked = bytes(self._partial[start : self._partial.find(b"\n", at)])
        start = self._partial.rfind(b"\n", 0, end) + 1
        line = bytes(self._partial[start:end])
        if line.strip():
            self.last = line
        else:  # SSE events end with a blank line: the event is the line before it
            before = self._partial[:start].rstrip(b"\n")
            candidate = bytes(before[before.rfind(b"\n") + 1 :])
            if candidate.strip():
                self.last = candidate
        del self._partial[: end + 1]

    def finish(self) -> None:
        if self._partial.strip():
            self.last = bytes(self._partial)
        self._partial.clear()


def _loads(data: bytes) -> object:
    try:
        return codec.loads(data) if data else None
    except ValueError:
        return None


def _ndjson_outcome(last: _LastLine) -> Outcome | None:
    line = _loads(last.last)
    if not isinstance(line, dict):
        return None
    if line.get("type") == "result":
        cache = CacheOutcome.of_answer(line)
        return Outcome(200, cache, usage=Usage.of_answer(line), output=line.get("output"))
    status = line.get("status")
    if line.get("type") == "error" and isinstance(status, int):
        return Outcome(status)
    return None


def _sse_outcome(last: _LastLine) -> Outcome | None:
    if not last.last.startswith(b"data:"):
        return None
    data = last.last[5:].strip()
    if data == b"[DONE]":
        usage = Usage.of_answer(_loads(last.marked[5:].strip())) if last.marked else None
        return Outcome(200, usage=usage)
    event = _loads(data)
    error = event.get("error") if isinstance(event, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        return Outcome(code if isinstance(code, int) and 400 <= code < 600 else 502)
    return None


def _error_tail(media: str, status: int, kind: str, message: str) -> bytes:
    if media.startswith(EVENT_STREAM):
        detail = {"message": message, "type": kind, "param": None, "code": status}
        return b"data: " + codec.dumps({"error": detail}) + b"\n\n"
    detail = {"type": kind, "message": message, "code": status}
    return codec.dumps({"type": "error", "error": detail, "status": status}) + b"\n"


class _CallerGone(Exception):
    """The client of the API server went away while its stream was being written."""


async def _send(out: web.StreamResponse, data: bytes) -> None:
    try:
        await out.write(data)
    except ConnectionError as error:
        raise _CallerGone from error


async def pass_through(
    upstream: aiohttp.ClientResponse, out: web.StreamResponse, endpoint: str
) -> Outcome:
    """Copy the stream; answer the outcome its last line reports.

    A caller that goes away is CLIENT_CLOSED; leaving the upstream response unread then
    closes the runner connection, which cancels the runner's work.
    """
    media = upstream.headers.get("Content-Type", "")
    sse = media.startswith(EVENT_STREAM)
    last = _LastLine(_USAGE if sse else None)
    first: float | None = None
    latest: float | None = None
    gaps: list[float] = []
    try:
        try:
            async for chunk in upstream.content.iter_any():
                if sse:
                    tokens = sum(chunk.count(marker) for marker in _CONTENT)
                    tokens = max(tokens, 1) if first is None else tokens
                else:
                    tokens = chunk.count(_DELTA)
                if tokens:
                    now = time.perf_counter()
                    if first is None:
                        first, tokens = now, tokens - 1
                    if tokens and latest is not None:
                        gaps.extend([(now - latest) / tokens] * tokens)
                    latest = now
                last.feed(chunk)
                await _send(out, chunk)
        except TimeoutError:
            status, kind, why = 504, "gateway_timeout", "did not finish in time"
        except aiohttp.ClientError as error:
            status, kind, why = 502, "bad_gateway", f"broke off the stream ({type(error).__name__})"
        else:
            last.finish()
            outcome = (_sse_outcome if sse else _ndjson_outcome)(last)
            if outcome is not None:
                return Outcome(
                    outcome.status,
                    outcome.cache,
                    first,
                    outcome.usage,
                    outcome.output,
                    latest,
                    tuple(gaps),
                )
            status, kind, why = 502, "bad_gateway", "ended the stream without a result"
        await _send(out, _error_tail(media, status, kind, f"the runner at {endpoint} {why}"))
        return Outcome(status, CacheOutcome.OFF, first)
    except _CallerGone:
        return Outcome(CLIENT_CLOSED, CacheOutcome.OFF, first)
