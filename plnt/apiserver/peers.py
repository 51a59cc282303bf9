"""The private channel between the worker processes of one server (`--workers N`).

A client's connection lands on whichever worker the kernel picks, so what a worker
answers about the server (its `/metrics`, a run's invocation log) must cover every
worker. Each worker therefore listens on a Unix socket of its own,
`<directory>/worker-<index>.sock`, in the server's private directory (mode 0700: only
the server's user reaches it), serving internal paths only:

* `GET /metrics`: this worker's own metric families, as JSON (`metrics.families_of`).
  The worker that answers a scrape merges its own with each sibling's, every sample
  labelled `worker="<index>"` (`metrics.merged_exposition`). A sibling that does not answer within
  `SCRAPE_SECONDS` is left out and counted (`plnt_apiserver_worker_scrape_errors_total`):
  a scrape never fails because of a sibling.
* `GET /streams/<name>`: the new items of a stream a kind registered (`Peers.stream`),
  one JSON document per line, from the moment the subscriber connects. Each worker
  subscribes to every sibling's streams and hands what arrives to the kind's `receive`
  (which records it as if local, without publishing it again); when a sibling goes away
  its subscription is opened again, with backoff, until it is back.

`Stream.publish` is on the caller's path, so it never awaits: it queues the encoded item
for each connected subscriber, and a subscriber that already holds
`SUBSCRIBER_BACKLOG` items (its worker reads too slowly) has the new one dropped and
counted (`plnt_apiserver_worker_forward_dropped_total`). A sibling that is down gets
nothing: what it missed is lost, as a single process's memory is lost on restart.

This module names no kind: the kinds register their streams with it from their packages.
Errors: `SocketPathTooLong` at construction, `DirectoryNotPrivate` at start-up; a
sibling's failures are counted, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from plnt.api import codec
from plnt.apiserver import metrics
from plnt.apiserver.backlogs import Backlog
from plnt.processes.apiprocesses import Slot

SCRAPE_SECONDS = 1.0
"""How long a scrape waits for a sibling's own metrics before leaving it out."""
CONNECT_SECONDS = 1.0
"""How long a subscription waits to connect to a sibling's socket."""
RETRY_SECONDS = (0.05, 1.0)
"""First and longest wait before subscribing again to a sibling that went away."""
SUBSCRIBER_BACKLOG = 10_000
"""Items a sibling's subscription may have queued and not yet read; more are dropped."""
MAX_SOCKET_PATH = 107
"""Bytes of a Unix socket path on Linux (`sun_path` holds 108, NUL included)."""

Receive = Callable[[Any], None]


class SocketPathTooLong(ValueError):
    """The worker directory is too deep for a Unix socket path."""


class DirectoryNotPrivate(PermissionError):
    """The worker directory lets other users in: its sockets answer without credentials,
    so only the server's user may reach them."""


def socket_path(directory: Path, index: int) -> Path:
    return directory / f"worker-{index}.sock"


class Stream:
    """A kind's items for the siblings: published here, received from theirs."""

    def __init__(self, name: str, receive: Receive, dropped: Any, backlog: int) -> None:
        self.name = name
        self.receive = receive
        """Called with each item a sibling published (records it, publishes nothing)."""
        self._dropped = dropped
        self._backlog = backlog
        self._subscribers: set[Backlog[bytes]] = set()
        self.subscribed: set[int] = set()
        """The siblings whose stream this worker reads now."""

    def publish(self, item: Any) -> None:
        """Queue `item` for every sibling reading this stream (never awaits)."""
        if not self._subscribers:
            return
        line = codec.dumps(item) + b"\n"
        for subscriber in self._subscribers:
            if not subscriber.push(line):
                self._dropped.inc()

    @property
    def subscribers(self) -> int:
        """How many siblings read this worker's stream now."""
        return len(self._subscribers)

    @contextlib.contextmanager
    def _attached(self) -> Iterator[Backlog[bytes]]:
        subscriber: Backlog[bytes] = Backlog(self._backlog)
        self._subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            subscriber.end()
            self._subscribers.discard(subscriber)

    def _end_all(self) -> None:
        for subscriber in self._subscribers:
            subscriber.end()


class _Subscriptions(Collector):
    """How many siblings' streams this worker reads now, by stream (read when scraped):
    below the sibling count while a sibling is down or not yet subscribed again."""

    def __init__(self, streams: dict[str, Stream]) -> None:
        self._streams = streams

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "plnt_apiserver_worker_subscriptions",
            "Sibling workers whose stream this worker reads now, by stream.",
            labels=["stream"],
        )
        for name, stream in self._streams.items():
            gauge.add_metric([name], len(stream.subscribed))
        yield gauge


class Peers:
    """This worker's private listener, its streams, and its calls to its siblings."""

    def __init__(
        self, slot: Slot, own: metrics.Metrics, *, backlog: int = SUBSCRIBER_BACKLOG
    ) -> None:
        for index in range(slot.count):
            if len(os.fsencode(socket_path(slot.directory, index))) > MAX_SOCKET_PATH:
                raise SocketPathTooLong(
                    f"{socket_path(slot.directory, index)}: longer than {MAX_SOCKET_PATH} bytes"
                )
        self.slot = slot
        self._own = own
        self._backlog = backlog
        self.streams: dict[str, Stream] = {}
        self._sessions: dict[int, aiohttp.ClientSession] = {}
        self.scrape_errors = Counter(
            "plnt_apiserver_worker_scrape_errors",
            "Sibling workers left out of a /metrics answer (no answer in time, or not "
            "metrics), by sibling.",
            ["sibling"],
            registry=own.registry,
        )
        self.forward_dropped = Counter(
            "plnt_apiserver_worker_forward_dropped",
            "Items not sent to a sibling worker because it had too many unread, by stream.",
            ["stream"],
            registry=own.registry,
        )
        for index in self.siblings():  # at 0 from the start, as every known label value
            self.scrape_errors.labels(str(index))
        own.registry.register(_Subscriptions(self.streams))

    def siblings(self) -> list[int]:
        return [i for i in range(self.slot.count) if i != self.slot.index]

    def stream(self, name: str, receive: Receive) -> Stream:
        """Register a stream (before the app starts); `receive` takes siblings' items."""
        if name in self.streams:
            raise ValueError(f"stream {name!r} is registered already")
        stream = Stream(name, receive, self.forward_dropped.labels(name), self._backlog)
        self.streams[name] = stream
        return stream

    async def exposition(self) -> bytes:
        """This worker's metrics and each sibling's that answered, labelled by worker."""
        siblings = self.siblings()
        answers = await asyncio.gather(*(self._scrape(i) for i in siblings))
        # After the scrapes: with their errors counted.
        own = metrics.families_of(self._own.registry)
        # Writing the merged text is the CPU of a scrape (a few times the own families'):
        # off the loop, so the requests this worker serves meanwhile are not held up.
        return await asyncio.to_thread(self._merge, own, dict(zip(siblings, answers, strict=True)))

    def _merge(self, own: Any, answers: dict[int, Any]) -> bytes:
        workers = {self.slot.index: metrics.worker_families(own, self.slot.index)}
        for index, data in answers.items():
            if data is None:
                continue
            try:
                workers[index] = metrics.worker_families(data, index)
            except ValueError:
                self.scrape_errors.labels(str(index)).inc()
        return metrics.merged_exposition([workers[i] for i in sorted(workers)])

    async def _scrape(self, index: int) -> Any:
        session = self._sessions.get(index)
        if session is None:
            self.scrape_errors.labels(str(index)).inc()
            return None
        try:
            async with asyncio.timeout(SCRAPE_SECONDS):
                async with session.get("http://worker/metrics") as answer:
                    if answer.status == 200:
                        return codec.loads(await answer.read())
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            pass
        self.scrape_errors.labels(str(index)).inc()
        return None

    async def _subscribe(self, stream: Stream, index: int) -> None:
        """Read sibling `index`'s stream for as long as this worker runs."""
        session = self._sessions[index]
        delay = RETRY_SECONDS[0]
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS)
        while True:
            try:
                async with session.get(
                    f"http://worker/streams/{stream.name}", timeout=timeout
                ) as answer:
                    if answer.status == 200:
                        stream.subscribed.add(index)
                        delay = RETRY_SECONDS[0]
                        await _read_lines(answer, stream.receive)
            except (aiohttp.ClientError, OSError, ValueError):
                pass  # the sibling is down or restarting: subscribe again below
            finally:
                stream.subscribed.discard(index)
            await asyncio.sleep(delay)  # backoff before the next attempt, not a wait on state
            delay = min(delay * 2, RETRY_SECONDS[1])

    def _internal_app(self) -> web.Application:
        internal = web.Application()

        async def own_metrics(request: web.Request) -> web.Response:
            body = codec.dumps(metrics.families_of(self._own.registry))
            return web.Response(body=body, content_type="application/json")

        async def stream_items(request: web.Request) -> web.StreamResponse:
            stream = self.streams.get(request.match_info["name"])
            if stream is None:
                raise web.HTTPNotFound()
            response = web.StreamResponse()
            response.headers["Content-Type"] = "application/x-ndjson"
            response.enable_chunked_encoding()
            # Attached before the answer starts: once the sibling sees it, it misses nothing.
            with stream._attached() as subscriber, contextlib.suppress(ConnectionResetError):
                await response.prepare(request)
                while lines := await subscriber.take():
                    await response.write(b"".join(lines))
            return response

        async def end_streams(_: web.Application) -> None:
            # Not listening any more: end the open streams so shutdown does not wait on them.
            for stream in self.streams.values():
                stream._end_all()

        internal.router.add_get("/metrics", own_metrics)
        internal.router.add_get("/streams/{name}", stream_items)
        internal.on_shutdown.append(end_streams)
        return internal

    async def context(self, app: web.Application) -> AsyncIterator[None]:
        """A cleanup context: the listener and the subscriptions, while the app runs."""
        directory = self.slot.directory
        if directory.stat().st_mode & 0o077:
            raise DirectoryNotPrivate(f"{directory}: others may enter it (it must be mode 0700)")
        # A sibling that hangs up cancels its stream's handler at once (no write needed).
        runner = web.AppRunner(
            self._internal_app(), access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await runner.setup()
        subscriptions: list[asyncio.Task[None]] = []
        try:
            await web.UnixSite(runner, str(socket_path(directory, self.slot.index))).start()
            for index in self.siblings():
                self._sessions[index] = aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=str(socket_path(directory, index)))
                )
            subscriptions = [
                asyncio.create_task(self._subscribe(stream, index), name=f"peer {index} {name}")
                for name, stream in self.streams.items()
                for index in self.siblings()
            ]
            yield
        finally:
            for task in subscriptions:
                task.cancel()
            await asyncio.gather(*subscriptions, return_exceptions=True)
            await runner.cleanup()
            for session in self._sessions.values():
                await session.close()
            self._sessions.clear()


async def _read_lines(answer: aiohttp.ClientResponse, receive: Receive) -> None:
    """Hand each JSON line of `answer` to `receive` (lines may be longer than aiohttp's
    readline limit: a shadow pair holds whole answers)."""
    pending = bytearray()
    async for chunk in answer.content.iter_any():
        start = len(pending)
        pending += chunk
        if b"\n" not in chunk:
            continue
        end = pending.rindex(b"\n", start)
        for line in bytes(pending[:end]).split(b"\n"):
            if line:
                receive(codec.loads(line))
        del pending[: end + 1]
