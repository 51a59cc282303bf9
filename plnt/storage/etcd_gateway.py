"""etcd's JSON gateway: the cheap path of the revision read and of a create.

Why: every consistent GET and LIST served from the watch cache first reads etcd's
current revision (`CachedStore`'s consistency rule), and every create writes its object
and then its Event. Through gRPC's core each call costs this process about 0.25 ms of
CPU whether or not other calls share it (call setup, HTTP/2 framing, the
completion-queue thread handing each completion to the event loop); for a lone GET that
was half of what it cost, for a CREATE half as well. etcd serves the same `Range` and
`Txn` on the same port as JSON over HTTP/1.1 (its gRPC gateway, `/v3/kv/range` and
`/v3/kv/txn`, on by default since 3.4): one write and one read on a kept-alive
connection, 0.06-0.07 ms here, and the same work in etcd.

`Gateway` keeps up to `connections` kept-alive connections, each carrying one request at
a time; when all are in use it is `busy`, and the caller uses gRPC instead of queueing.
A revision read whose kept-alive connection fails before its answer is sent again once
on a new one (a read can be repeated). A create is never repeated here: whether etcd
applied it is for the caller to find out (`GatewayFailed.sent`).

`GatewayMissing` says the gateway is not there (disabled, an older or different
server): the caller goes back to gRPC for good. Any other failure is `GatewayFailed`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from typing import Any

import orjson

_MAX_HEAD = 16 * 1024
_MAX_BODY = 1 << 20
CONNECTIONS = 4
"""Kept-alive connections at most: enough for the creates and revision reads one API
server has in flight at once on two cores (more go to gRPC, which multiplexes)."""


class GatewayMissing(Exception):
    """etcd answered, but has no JSON gateway at the path (404, 405, 501)."""


class GatewayFailed(Exception):
    """The call failed for another reason (connection, timeout, an error answer).

    `sent`: the request may have reached etcd (so a write may have been applied);
    `timed_out`: no answer came within the timeout.
    """

    def __init__(self, message: str, *, sent: bool, timed_out: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.timed_out = timed_out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class _Connection:
    """One kept-alive HTTP/1.1 connection to the gateway, one request at a time."""

    def __init__(self, host: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def open(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._ssl, limit=_MAX_HEAD
            )

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send `request` on the open connection: the answer's status and body."""
        assert self._reader is not None and self._writer is not None
        reader = self._reader
        self._writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status, headers = _parse_head(head)
        body = await _read_body(reader, headers)
        if headers.get(b"connection") == b"close":
            self.drop()
        return status, body

    def drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def close(self) -> None:
        writer = self._writer
        self.drop()
        if writer is not None:
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


_BROKEN = (OSError, EOFError, asyncio.IncompleteReadError, ValueError, KeyError, TypeError)
"""How a connection or an answer fails: dropped, cut short, not HTTP, not the JSON asked."""


class Gateway:
    """Revision reads and creates over a few kept-alive HTTP/1.1 connections."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        timeout: float,
        connections: int = CONNECTIONS,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._timeout = timeout
        self._max = connections
        self._idle: list[_Connection] = []
        self._in_use = 0
        self._head = b"Host: %s:%d\r\nContent-Type: application/json\r\n" % (
            _host_header(host),
            port,
        )

    @property
    def busy(self) -> bool:
        """True while every connection carries a call (a further one would queue)."""
        return self._in_use >= self._max

    async def revision(self, key: bytes) -> int:
        """etcd's revision now: a linearizable count-only range of `key`."""
        body = orjson.dumps({"key": _b64(key), "count_only": True})
        return _revision_of(await self._call(b"/v3/kv/range", body, repeatable=True))

    async def create(self, key: bytes, value: bytes) -> tuple[bool, int]:
        """Put `value` at `key` if the key does not exist: (created, etcd's revision)."""
        encoded = _b64(key)
        body = orjson.dumps(
            {
                "compare": [
                    {"key": encoded, "target": "CREATE", "result": "EQUAL", "create_revision": 0}
                ],
                "success": [{"request_put": {"key": encoded, "value": _b64(value)}}],
            }
        )
        answer = await self._call(b"/v3/kv/txn", body, repeatable=False)
        # The gateway leaves out fields at their default: `succeeded` only when true.
        return bool(answer.get("succeeded", False)), _revision_of(answer)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.close()

    async def _call(self, path: bytes, body: bytes, *, repeatable: bool) -> dict[str, Any]:
        if self.busy:
            raise GatewayFailed("every gateway connection is in use", sent=False)
        request = (
            b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (path, self._head, len(body))
            + body
        )
        connection = (
            self._idle.pop() if self._idle else _Connection(self._host, self._port, self._ssl)
        )
        self._in_use += 1
        sent = False
        try:
            async with asyncio.timeout(self._timeout):
                reused = connection.open
                try:
                    await connection.connect()
                    sent = True
                    status, answer = await connection.exchange(request)
                except _BROKEN:
                    connection.drop()
                    if not (reused and repeatable):
                        raise
                    await connection.connect()  # a kept-alive connection etcd had closed
                    status, answer = await connection.exchange(request)
        except TimeoutError as exc:
            connection.drop()
            raise GatewayFailed(
                f"etcd's gateway did not answer {path.decode()} in time", sent=sent, timed_out=True
            ) from exc
        except _BROKEN as exc:
            connection.drop()
            raise GatewayFailed(
                f"etcd's gateway call {path.decode()} failed: {exc!r}", sent=sent
            ) from exc
        except BaseException:  # cancelled mid-exchange: the connection's state is unknown
            connection.drop()
            raise
        finally:
            self._in_use -= 1
            if connection.open:
                self._idle.append(connection)
        if status in (404, 405, 501):
            raise GatewayMissing(f"etcd answered {status} to {path.decode()}")
        if status != 200:
            raise GatewayFailed(f"etcd's gateway answered {status}: {answer[:200]!r}", sent=True)
        try:
            decoded = orjson.loads(answer)
            if not isinstance(decoded, dict):
                raise TypeError(f"not a JSON object: {answer[:80]!r}")
        except (orjson.JSONDecodeError, TypeError) as exc:
            raise GatewayFailed(f"etcd's gateway answer is not JSON: {exc}", sent=True) from exc
        return decoded


def _revision_of(answer: dict[str, Any]) -> int:
    """The revision in an answer's header (an int64, which the JSON carries as a string)."""
    try:
        return int(answer["header"]["revision"])
    except (KeyError, TypeError, ValueError) as exc:
        raise GatewayFailed(f"etcd's gateway answer has no revision: {exc!r}", sent=True) from exc


def _host_header(host: str) -> bytes:
    """The Host header's name part: an IPv6 address in brackets, a name as IDNA."""
    if ":" in host:
        return b"[" + host.encode("ascii") + b"]"
    return host.encode("idna")


def _parse_head(head: bytes) -> tuple[int, dict[bytes, bytes]]:
    """The status code and the (lower-cased) headers of an HTTP/1.1 response head."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
    headers: dict[bytes, bytes] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower()] = value.strip().lower()
    return int(parts[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
    """The body, by Content-Length or chunked transfer coding."""
    if headers.get(b"transfer-encoding", b"").endswith(b"chunked"):
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if total > _MAX_BODY:
                raise ValueError("etcd's gateway answer is too large")
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get(b"content-length", b"-1"))
    if not 0 <= length <= _MAX_BODY:
        raise ValueError("etcd's gateway answer has no usable Content-Length")
    return await reader.readexactly(length)
