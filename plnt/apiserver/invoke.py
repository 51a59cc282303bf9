"""The `invoke` and `invocations` subresources: call a run's runners through the API server.

`POST …/workflowruns/{name}/invoke` with `{"inputs": {...}}` (the runner's own envelope)
picks a revision and endpoint from `status.traffic` (see `traffic.Balancer`), forwards
the body to `{endpoint}/invoke` over one pooled client session, and answers the runner's
status and body unchanged, adding `X-Plnt-Revision`, `X-Plnt-Cache` (hit, miss, partial
or off, from the answer's `cache.hits/misses`) and `Server-Timing` (the runner's entries
plus `apiserver;dur=` for the time spent here, upstream round trip excluded).
Authorization sees verb `create` on `workflowruns/invoke`, so a policy can grant
invoking without granting edits.

With `?stream=true` (or `Accept: application/x-ndjson`) the runner is asked for its NDJSON
stream and the bytes are passed on as they arrive (never buffered whole), with
`X-Plnt-Revision` and the runner's `Content-Type`; a stream has no `Server-Timing` or
`X-Plnt-Cache` (its last line holds timings and cache). An answer that is not a stream (the
runner refused the inputs) is passed on whole, as without streaming. A failure once the
stream began becomes its last line, `{"type":"error","error":{...},"status":502|504}`.

Errors (metav1.Status): 400 BadRequest for a body that is not the envelope; 503
ServiceUnavailable when the run has no ready revision, or when the runner chosen (and
one other, if there is one) cannot be reached; 504 Timeout when the runner does not
answer within the invoke timeout. A connection failure is retried once on another
endpoint; a timeout is not (the runner may be working on it).

`GET …/workflowruns/{name}/invocations` lists the last 100 invocations this API server
made for the run, oldest first (time, revision, endpoint, status, durationMs, cache). A
stream is logged when it ends, with the status its last line reports (499 when the caller
went away first).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from plnt.api import codec, errors
from plnt.api.meta import now_rfc3339
from plnt.apiserver import keys, negotiation, params, responses, traffic
from plnt.apiserver.ndjson import CLIENT_CLOSED, NDJSON, pass_through, wants_stream
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry.store import ResourceStore

_ENVELOPE = 'the invoke body must be a JSON object {"inputs": {...}}'
_PASSED_HEADERS = ("Content-Type", "X-Plnt-Cache")
T = TypeVar("T")


async def upstream_context(app: web.Application) -> AsyncIterator[None]:
    """The pooled session to runners and the balancer, for the app's lifetime."""
    settings = app[keys.SETTINGS]
    seconds = settings.invoke_timeout_seconds
    connector = aiohttp.TCPConnector(limit=1000, limit_per_host=0)
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=seconds),
        auto_decompress=False,
    )
    app[keys.UPSTREAM] = session
    app[keys.INVOKER] = traffic.Invoker()
    try:
        yield
    finally:
        await session.close()


def _inputs_of(body: Any) -> Any:
    if not isinstance(body, dict) or "inputs" not in body:
        raise errors.BadRequest(_ENVELOPE)
    extra = sorted(set(body) - {"inputs", "apiVersion", "kind"})
    if extra:
        raise errors.BadRequest(f"{_ENVELOPE}; unexpected fields: {', '.join(extra)}")
    return body["inputs"]


async def _payload(request: web.Request) -> bytes:
    """The bytes to forward: a JSON body is checked and passed on as it came (no re-encoding);
    a YAML body is decoded and sent on as JSON."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in ("", "application/json"):
        body, _ = await params.decode_object(request, limit=_limit(request))
        _inputs_of(body)
        return codec.dumps(body)
    data = await params.read_body(request, limit=_limit(request))
    try:
        body = codec.loads(data)
    except ValueError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error
    _inputs_of(body)
    return data


def _limit(request: web.Request) -> int:
    return request.app[keys.SETTINGS].max_request_body_bytes


class _Unreachable(Exception):
    """The runner at an endpoint could not be connected to (nothing was sent)."""


def _timeout(endpoint: str, error: BaseException) -> errors.Timeout:
    timeout = errors.Timeout(
        f"the runner at {endpoint} did not answer in time", retry_after_seconds=1
    )
    timeout.__cause__ = error
    return timeout


async def _forward(
    session: aiohttp.ClientSession, endpoint: str, payload: bytes
) -> tuple[int, bytes, dict[str, str], list[str]]:
    try:
        async with session.post(
            f"{endpoint}/invoke",
            data=payload,
            headers={"Content-Type": "application/json"},
        ) as response:
            body = await response.read()
            headers = {h: response.headers[h] for h in _PASSED_HEADERS if h in response.headers}
            return response.status, body, headers, response.headers.getall("Server-Timing", [])
    except TimeoutError as error:
        raise _timeout(endpoint, error) from error
    except aiohttp.ClientConnectionError as error:
        raise _Unreachable(str(error) or type(error).__name__) from error


@dataclass
class _Route:
    """Where one invocation is going: the revision, the endpoint, and time spent upstream."""

    targets: list[traffic.Target]
    target: traffic.Target
    endpoint: str
    upstream_seconds: float = 0.0


async def _with_failover(
    request: web.Request, info: RequestInfo, route: _Route, send: Callable[[str], Awaitable[T]]
) -> T:
    """`send(endpoint)` once, and once more on another endpoint if the first is unreachable."""
    balancer = request.app[keys.INVOKER].balancer
    failures: list[str] = []
    while True:
        sent = time.perf_counter()
        try:
            with balancer.track(route.endpoint):
                result = await send(route.endpoint)
            route.upstream_seconds += time.perf_counter() - sent
            return result
        except _Unreachable as error:
            route.upstream_seconds += time.perf_counter() - sent
            failures.append(f"{route.endpoint}: {error}")
            retry = (
                None
                if len(failures) > 1
                else balancer.fallback(route.targets, route.target, route.endpoint)
            )
            if retry is None:
                raise errors.ServiceUnavailable(
                    f"workflowrun {info.name}: the runner could not be reached "
                    f"({'; '.join(failures)})",
                    retry_after_seconds=1,
                ) from error
            route.endpoint = retry
            route.target = next((t for t in route.targets if retry in t.endpoints), route.target)


async def handle_invoke(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    began = time.perf_counter()
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    stream = wants_stream(request)
    payload = await _payload(request)
    obj = await store.get(info.namespace, info.name)
    balancer = request.app[keys.INVOKER].balancer
    targets = traffic.targets_of(obj.get("status"))
    target = balancer.pick_target(targets)
    endpoint = None if target is None else balancer.pick_endpoint(target.endpoints)
    if target is None or endpoint is None:
        raise errors.ServiceUnavailable(
            f"workflowrun {info.name} has no ready revision", retry_after_seconds=1
        )
    route = _Route(targets=targets, target=target, endpoint=endpoint)
    session = request.app[keys.UPSTREAM]
    try:
        if stream:
            return await _with_failover(
                request,
                info,
                route,
                lambda at: _relay(request, info, session, at, payload, route=route, began=began),
            )
        answer = await _with_failover(
            request, info, route, lambda at: _forward(session, at, payload)
        )
    except errors.APIError as error:
        _log_route(request, info, route, error.code, began, "off")
        raise
    return _buffered(request, info, route, answer, began=began)


def _buffered(
    request: web.Request,
    info: RequestInfo,
    route: _Route,
    answer: tuple[int, bytes, dict[str, str], list[str]],
    *,
    began: float,
) -> web.Response:
    """The runner's whole answer, with the revision, cache and timing headers added."""
    status, body, passed, timings = answer
    cache = passed.pop("X-Plnt-Cache", None) or _cache_from_body(body)
    total_ms = _log_route(request, info, route, status, began, cache)
    own_ms = max(0.0, total_ms - route.upstream_seconds * 1000.0)
    headers = {
        "X-Plnt-Revision": str(route.target.revision),
        "X-Plnt-Cache": cache,
        "Server-Timing": ", ".join([*timings, f"apiserver;dur={own_ms:.3f}"]),
        "Content-Type": passed.get("Content-Type", responses.JSON_CONTENT_TYPE),
    }
    return web.Response(status=status, body=body, headers=headers)


async def _relay(
    request: web.Request,
    info: RequestInfo,
    session: aiohttp.ClientSession,
    endpoint: str,
    payload: bytes,
    *,
    route: _Route,
    began: float,
) -> web.StreamResponse:
    """Pass the runner's NDJSON stream on chunk by chunk, then log how it ended.

    An answer that is not a stream (an error before the first line) is answered whole, as
    without streaming. A failure after the stream began cannot change the status any more:
    it becomes the stream's last line, `{"type": "error", ...}`.
    """
    try:
        async with session.post(
            f"{endpoint}/invoke",
            params={"stream": "true"},
            data=payload,
            headers={"Content-Type": "application/json", "Accept": NDJSON},
        ) as upstream:
            media = upstream.headers.get("Content-Type", "")
            if upstream.status != 200 or not media.startswith(NDJSON):
                body = await upstream.read()
                passed = {h: upstream.headers[h] for h in _PASSED_HEADERS if h in upstream.headers}
                timings = upstream.headers.getall("Server-Timing", [])
                return _buffered(
                    request, info, route, (upstream.status, body, passed, timings), began=began
                )
            out = web.StreamResponse(
                status=200,
                headers={
                    "Content-Type": media,
                    "X-Plnt-Revision": str(route.target.revision),
                    "Cache-Control": "no-cache, private",
                },
            )
            try:
                await out.prepare(request)
            except ConnectionError:
                status, cache = CLIENT_CLOSED, "off"
            else:
                status, cache = await pass_through(upstream, out, endpoint)
    except TimeoutError as error:
        raise _timeout(endpoint, error) from error
    except aiohttp.ClientConnectionError as error:
        raise _Unreachable(str(error) or type(error).__name__) from error
    _log_route(request, info, route, status, began, cache)
    with contextlib.suppress(ConnectionError):
        await out.write_eof()
    return out


def _cache_from_body(answer: bytes) -> str:
    """The cache outcome from the answer's `cache` field (runners that send no header)."""
    try:
        decoded = codec.loads(answer) if answer else None
    except ValueError:
        decoded = None
    return traffic.cache_outcome(decoded)


def _log_route(
    request: web.Request, info: RequestInfo, route: _Route, status: int, began: float, cache: str
) -> float:
    """Record one invocation; returns its duration in milliseconds."""
    revision, endpoint = route.target.revision, route.endpoint
    duration = (time.perf_counter() - began) * 1000.0
    request.app[keys.INVOKER].log.record(
        info.namespace,
        info.name,
        {
            "time": now_rfc3339(),
            "revision": revision,
            "endpoint": endpoint,
            "status": status,
            "durationMs": round(duration, 3),
            "cache": cache,
        },
    )
    return duration


async def handle_invocations(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    if info.verb != "get":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    await store.get(info.namespace, info.name)  # 404 for a run that does not exist
    return responses.json_response(
        {
            "kind": "WorkflowRunInvocationList",
            "apiVersion": store.definition.api_version,
            "metadata": {},
            "items": request.app[keys.INVOKER].log.entries(info.namespace, info.name),
        }
    )
