"""`GET …/workflowruns/{name}/invocationlog?watch=true`: the invocation log, followed.

The answer is a watch stream in kube's shape, one JSON event per line: first an
`ADDED` event for every entry the log holds (oldest first, as the list answers them),
then one `ADDED` event per invocation as it is recorded. Entries never change or go
away, so there are no other event types. A log entry is recorded when its invocation
ends, so an event reaches the watcher at the moment `GET …/invocationlog` would show it.

The stream ends at `timeoutSeconds` (absent or 0: never), when the client goes away, at
shutdown (it is one of the server's open watches), or when the watcher falls more than
`traffic.FOLLOWER_BACKLOG` entries behind: it gets the entries queued until then and the
stream ends, as kube-apiserver ends a watcher too slow to take its events, so a client
that stops reading cannot make the server buffer without bound (`traffic.Follower`). It
is long-running (`longrunning.py`), so it holds no max-in-flight slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import keys, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import keys as run_keys


def _seconds(request: web.Request) -> float | None:
    raw = request.query.get("timeoutSeconds")
    if raw is None or raw == "":
        return None
    try:
        seconds = int(raw)
    except ValueError as error:
        raise errors.BadRequest(f"timeoutSeconds: invalid value {raw!r}") from error
    return None if seconds == 0 else float(max(seconds, 0))


def _event(entry: dict[str, Any]) -> bytes:
    return responses.dumps({"type": "ADDED", "object": entry}) + b"\n"


async def serve(
    request: web.Request, info: RequestInfo, *, warnings: tuple[str, ...] = ()
) -> web.StreamResponse:
    """Stream the run's log (the caller checked that the run exists), with `warnings` as
    `Warning` headers."""
    timeout = _seconds(request)
    log = request.app[run_keys.INVOKER].log
    response = web.StreamResponse(status=200)
    response.headers["Content-Type"] = responses.JSON_CONTENT_TYPE
    response.headers["Cache-Control"] = "no-cache, private"
    responses.add_warnings(response, warnings)
    response.enable_chunked_encoding()
    task = asyncio.current_task()
    watches = request.app[keys.WATCHES].tasks
    if task is not None:
        watches.add(task)
    try:
        with log.follow(info.namespace, info.name) as follower:
            # Followed before the snapshot is taken, so nothing falls between the two.
            backlog = log.entries(info.namespace, info.name)
            await response.prepare(request)
            await response.write(b"".join(_event(entry) for entry in backlog))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    while entries := await follower.take():
                        await response.write(b"".join(_event(entry) for entry in entries))
    except ConnectionResetError:
        # The client hung up; how a followed log ends (see `watch`).
        return response
    finally:
        if task is not None:
            watches.discard(task)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response
