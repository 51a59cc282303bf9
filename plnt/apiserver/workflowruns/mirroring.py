"""Shadow traffic's I/O: the senders that mirror queued calls to the canary, and the read path.

`context` (a cleanup context, after the runner session's) runs `WORKERS` tasks that take
mirrored calls off the run's `shadowing.Shadower` queue and `send` each to a canary
endpoint: the pair is kept in the `ShadowLog`, the call logged in the invocation log with
`"shadow": true`. `handle_shadow` answers `GET …/workflowruns/NAME/shadow`. What a window,
a mirror and a pair are is `shadowing` (module docstring), which does no I/O.

Errors: none raised by the senders; a canary that fails or cannot be reached is a pair
with its error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from plnt.api import codec, errors
from plnt.api import shadows as wire
from plnt.api.headers import BYPASS_HEADERS, CACHE_HEADER, CacheOutcome
from plnt.api.meta import now_rfc3339
from plnt.apiserver import responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.apiserver.workflowruns.shadowing import Mirror, Shadower
from plnt.registry.store import ResourceStore

WORKERS = 8
"""Mirrored calls in flight at once per API server process."""


def _loads(data: bytes | None) -> Any:
    try:
        return codec.loads(data) if data else None
    except ValueError:
        return None


def _output(body: Any) -> Any:
    return body.get("output") if isinstance(body, dict) else None


def _error(status: int, body: Any) -> str:
    detail = body.get("error") if isinstance(body, dict) else None
    message = detail.get("message") if isinstance(detail, dict) else None
    return f"HTTP {status}: {message or body}"


async def send(app: web.Application, mirror: Mirror) -> dict[str, Any]:
    """Send one mirrored call to the canary; record the pair and the log entry; answer the pair."""
    invoker = app[run_keys.INVOKER]
    session = app[run_keys.UPSTREAM]
    window = mirror.window
    endpoint = invoker.balancer.pick_endpoint(window.endpoints) or window.endpoints[0]
    began = time.perf_counter()
    status, body, cache = 0, None, CacheOutcome.OFF.value
    problem: str | None = None
    with invoker.balancer.track(endpoint):
        try:
            async with session.post(
                f"{endpoint}/invoke",
                data=mirror.body,
                # The canary's own answer, never its step cache's: a pair compares answers.
                headers={"Content-Type": "application/json", **BYPASS_HEADERS},
            ) as answer:
                status, data = answer.status, await answer.read()
                body = _loads(data)
                cache = answer.headers.get(CACHE_HEADER) or CacheOutcome.of_answer(body)
        except TimeoutError:
            status, problem = 504, f"the canary at {endpoint} did not answer in time"
        except aiohttp.ClientError as error:
            status, problem = 502, f"the canary at {endpoint} could not be reached ({error})"
    milliseconds = round((time.perf_counter() - began) * 1000.0, 3)
    invoker.log.record(
        mirror.namespace,
        mirror.name,
        {
            "time": now_rfc3339(),
            "revision": window.revision,
            "endpoint": endpoint,
            "status": status,
            "durationMs": milliseconds,
            "cache": cache,
            "shadow": True,
        },
    )
    canary: dict[str, Any] = {"revision": window.revision, "status": status}
    if problem is None and status == 200:
        canary["output"] = _output(body)
    else:
        canary["error"] = problem or _error(status, body)
    canary["durationMs"] = milliseconds
    stable_output = (
        _output(_loads(mirror.stable_body))
        if mirror.stable_body is not None
        else mirror.stable_output
    )
    envelope = _loads(mirror.body)
    inputs = envelope.get("inputs") if isinstance(envelope, dict) else None
    pair = {
        "id": uuid.uuid4().hex,
        "time": now_rfc3339(),
        "inputs": inputs if isinstance(inputs, dict) else {},
        "stable": {
            "revision": mirror.stable_revision,
            "status": 200,
            "output": stable_output,
            "durationMs": round(mirror.stable_ms, 3),
        },
        "canary": canary,
    }
    app[run_keys.SHADOWER].log.record(mirror.namespace, mirror.name, pair)
    return pair


async def _work(app: web.Application, shadower: Shadower) -> None:
    while True:
        mirror = await shadower.queue.get()
        try:
            await send(app, mirror)
        finally:
            shadower.done(mirror)


async def context(app: web.Application) -> AsyncIterator[None]:
    """The shadower and its pool of senders, for the app's lifetime (after the session)."""
    counter = app[run_keys.SHADOW_DROPPED]
    shadower = app[run_keys.SHADOWER] = Shadower(on_drop=counter.inc)
    workers = [asyncio.create_task(_work(app, shadower)) for _ in range(WORKERS)]
    try:
        yield
    finally:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


async def handle_shadow(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    """`GET …/shadow[?revision=N]`: this API server's pairs (oldest first) and drops."""
    if info.verb != "get":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    await store.get(info.namespace, info.name)  # 404 for a run that does not exist
    raw = request.query.get("revision")
    revision: int | None = None
    if raw:
        try:
            revision = int(raw)
        except ValueError as error:
            raise errors.BadRequest(f"revision: not a number: {raw!r}") from error
    log = request.app[run_keys.SHADOWER].log
    pairs = log.pairs(info.namespace, info.name, revision)
    answer = wire.ShadowList(
        revision=revision,
        dropped=log.dropped(info.namespace, info.name, revision),
        items=[wire.ShadowPair.model_validate(p) for p in pairs],
    )
    return responses.json_response(answer.to_wire())
