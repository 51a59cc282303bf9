"""Watch streaming: one JSON event per line, headers sent at once, nothing held back.

An event is written as soon as no further event is already buffered for this
watcher; events that are (a burst, a paced wake-up round of the watch cache, or a
watcher that fell behind) go out in one write. A plain-JSON event line is
built once for all watchers (`keys.OpenWatches.line`), around the object's bytes
that a GET at that resourceVersion answers (`ResourceStore.encoded`). The stream ends at
`timeoutSeconds` (absent or 0: a random 30-60 minutes, as kube-apiserver's
minRequestTimeout does; negative: at once), when the client goes away, or at
shutdown. Closing early would make `kubectl get -w` exit silently, so we never do.

A client going away is how most watches end (`kubectl wait` hangs up as soon as its
condition holds). Where the handler is not cancelled on a hang-up (`plnt serve`), the
next write meets the closed connection; that ends the stream as a 200, logged at debug.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import random
from typing import Any

from aiohttp import web

from plnt.apiserver import keys, negotiation, responses
from plnt.registry import tables
from plnt.registry.options import ListOptions
from plnt.registry.store import ResourceStore

log = logging.getLogger(__name__)


def _timeout(request: web.Request, options: ListOptions) -> float:
    """Seconds the stream lasts: `timeoutSeconds`, or kube's random default when absent or 0.

    A negative value ends the stream at once, as kube's already-expired context does.
    """
    seconds = options.timeout_seconds
    if seconds:
        return float(max(seconds, 0))
    minimum = request.app[keys.SETTINGS].min_request_timeout_seconds
    return float(minimum) * (1.0 + random.random()) if minimum > 0 else math.inf


def _line(event_type: str, body: Any) -> bytes:
    return responses.dumps({"type": event_type, "object": body}) + b"\n"


def _object_line(store: ResourceStore, event_type: str, obj: Any) -> bytes:
    """A plain event's line around the object's bytes (a GET's at that resourceVersion),
    byte for byte what `_line` writes: the compact encoding of `{"type", "object"}`."""
    return b"".join((b'{"type":"', event_type.encode(), b'","object":', store.encoded(obj), b"}\n"))


async def serve(
    request: web.Request, store: ResourceStore, namespace: str, options: ListOptions
) -> web.StreamResponse:
    rep = negotiation.choose(request.headers.get("Accept"))
    include = "Metadata"
    if rep.kind == "Table":
        include = tables.check_include_object(request.query.get("includeObject"))
    timeout = _timeout(request, options)
    settings = request.app[keys.SETTINGS]
    stream = store.watch(
        namespace,
        options,
        send_initial_events=options.send_initial_events,
        allow_bookmarks=options.allow_watch_bookmarks,
        bookmark_interval=settings.bookmark_interval_seconds,
    )
    response = web.StreamResponse(status=200)
    response.headers["Content-Type"] = responses.JSON_CONTENT_TYPE
    response.headers["Cache-Control"] = "no-cache, private"
    response.enable_chunked_encoding()
    gauge = request.app[keys.METRICS].open_watches.labels(store.definition.plural)
    gauge.inc()
    task = asyncio.current_task()
    open_watches = request.app[keys.WATCHES]
    watches = open_watches.tasks
    if task is not None:
        watches.add(task)
    first_table = True

    def encode(event_type: str, obj: Any) -> bytes:
        """The line of one event in the representation this client asked for."""
        nonlocal first_table
        body: Any = obj
        if event_type != "ERROR":
            if rep.kind == "Table":
                rows = [] if event_type == "BOOKMARK" else [obj]
                body = tables.table(
                    store.definition,
                    rows,
                    include_object=include,
                    resource_version=obj["metadata"].get("resourceVersion", ""),
                    with_columns=first_table,
                )
                body["apiVersion"] = f"meta.k8s.io/{rep.version}"
                if event_type == "BOOKMARK":
                    body["metadata"] = obj["metadata"]
                first_table = False
            elif rep.kind.startswith("PartialObjectMetadata"):
                body = tables.partial_object_metadata(obj)
        if body is obj and event_type != "ERROR":
            return open_watches.line(
                event_type, obj, functools.partial(_object_line, store, event_type, obj)
            )
        return _line(event_type, body)

    batch: list[bytes] = []
    try:
        async with stream:
            await response.prepare(request)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if math.isinf(timeout) else timeout):
                    async for event_type, obj in stream:
                        batch.append(encode(event_type, obj))
                        if event_type == "ERROR":
                            await response.write(b"".join(batch))
                            break
                        # What is already buffered goes in the same write (taken without
                        # an await per event where the watch allows); flush before waiting.
                        for ready_type, ready_obj in stream.take_ready():
                            batch.append(encode(ready_type, ready_obj))
                        if not stream.ready():
                            await response.write(b"".join(batch))
                            batch.clear()
    except ConnectionResetError:
        log.debug("watch client went away: %s %s", request.method, request.path_qs)
        return response
    finally:
        gauge.dec()
        if task is not None:
            watches.discard(task)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response
