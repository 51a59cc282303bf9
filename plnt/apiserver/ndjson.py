"""NDJSON invocation streams passing through the API server.

The runner writes one JSON line per finished step and a last `result` (or `error`)
line. The API server copies the stream chunk by chunk without parsing it, remembering
only the last complete line, which says how the invocation ended (for the invocation
log). A failure after the stream began cannot change the HTTP status any more, so it
becomes the stream's last line.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from plnt.api import codec
from plnt.apiserver import traffic

NDJSON = "application/x-ndjson"
CLIENT_CLOSED = 499  # nginx's convention for "the caller went away first"


def wants_stream(request: web.Request) -> bool:
    """`?stream=true` (or 1/yes) or an Accept header naming NDJSON."""
    if request.query.get("stream", "").lower() in ("true", "1", "yes"):
        return True
    return NDJSON in request.headers.get("Accept", "")


class _LastLine:
    """Remembers the last complete line of a byte stream passing through (not the stream)."""

    def __init__(self) -> None:
        self._partial = bytearray()
        self.last = b""

    def feed(self, chunk: bytes) -> None:
        self._partial += chunk
        end = self._partial.rfind(b"\n")
        if end < 0:
            return
        start = self._partial.rfind(b"\n", 0, end) + 1
        line = bytes(self._partial[start:end])
        if line.strip():
            self.last = line
        del self._partial[: end + 1]

    def finish(self) -> None:
        if self._partial.strip():
            self.last = bytes(self._partial)
        self._partial.clear()


def _error_line(status: int, kind: str, message: str) -> bytes:
    detail = {"type": kind, "message": message, "code": status}
    return codec.dumps({"type": "error", "error": detail, "status": status}) + b"\n"


def _outcome(last: bytes) -> tuple[int, str] | None:
    """(status, cache) from a stream's last line, None when it is neither result nor error."""
    try:
        line = codec.loads(last) if last else None
    except ValueError:
        return None
    if not isinstance(line, dict):
        return None
    if line.get("type") == "result":
        return 200, traffic.cache_outcome(line)
    status = line.get("status")
    if line.get("type") == "error" and isinstance(status, int):
        return status, "off"
    return None


class _CallerGone(Exception):
    """The client of the API server went away while its stream was being written."""


async def _send(out: web.StreamResponse, data: bytes) -> None:
    try:
        await out.write(data)
    except ConnectionError as error:
        raise _CallerGone from error


async def pass_through(
    upstream: aiohttp.ClientResponse, out: web.StreamResponse, endpoint: str
) -> tuple[int, str]:
    """Copy the stream; answer the (status, cache outcome) its last line reports."""
    last = _LastLine()
    try:
        try:
            async for chunk in upstream.content.iter_any():
                last.feed(chunk)
                await _send(out, chunk)
        except TimeoutError:
            status, kind, why = 504, "gateway_timeout", "did not finish in time"
        except aiohttp.ClientError as error:
            status, kind, why = 502, "bad_gateway", f"broke off the stream ({type(error).__name__})"
        else:
            last.finish()
            outcome = _outcome(last.last)
            if outcome is not None:
                return outcome
            status, kind, why = 502, "bad_gateway", "ended the stream without a result"
        await _send(out, _error_line(status, kind, f"the runner at {endpoint} {why}"))
        return status, "off"
    except _CallerGone:
        return CLIENT_CLOSED, "off"  # the runner finishes the invocation on its own
