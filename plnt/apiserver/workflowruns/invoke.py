"""The `invoke` and `invocationlog` subresources, and the forwarding `proxy` shares with them.

`POST …/workflowruns/{name}/invoke` with `{"inputs": {...}}` (the envelope the runner
parses too, `InvokeRequest` in `plnt.api.invocations`; `apiVersion` and `kind` may name it)
picks a revision and endpoint from `status.traffic` (see `traffic.Balancer`), forwards
the body to `{endpoint}/invoke` over one pooled client session, and answers the runner's
status and body unchanged, adding `X-Plnt-Revision`, `X-Plnt-Cache` (hit, miss, partial
or off, from the answer's `cache.hits/misses`) and `Server-Timing` (the runner's entries
plus `apiserver;dur=` for the time spent here, upstream round trip excluded).
Authorization sees verb `create` on `workflowruns/invoke`, so a policy can grant
invoking without granting edits.

With `?stream=true` (or `Accept: application/x-ndjson`) the runner is asked for its NDJSON
stream and the bytes are passed on as they arrive (never buffered whole, see `relay`), with
`X-Plnt-Revision`, the runner's `Content-Type` and `Server-Timing: apiserver;dur=` (the time
spent here before forwarding; the stream's last line holds the runner's timings and cache).
An answer that is not a stream (the runner refused the inputs) is passed on whole, as
without streaming. A failure once the stream began becomes its last line,
`{"type":"error","error":{...},"status":502|504}`.

`forward(request, info, call)` is that machinery for any runner path: the `proxy`
subresource (`proxy.py`) uses it for `/v1/chat/completions`, `/v1/models` and `/invoke`.
Whatever the path, an answer whose Content-Type is a stream (NDJSON, SSE) is relayed chunk
by chunk, any other is answered whole.

Every call has a deadline (`calllimits`): the caller's `?timeout=` (`2s`, `500ms`) or
`X-Plnt-Timeout-Ms`, else the run's `spec.calls.timeoutSeconds`, else the invoke timeout,
and a criticality (`X-Plnt-Criticality`, else `spec.calls.criticality`). The runner is sent
the time left and the criticality (`plnt.api.headers`), and is waited for until the deadline
and a short grace, so the runner's 504 naming the hop that ran out (a step, a backend's
queue, the backend call) is what the caller sees; a refusal for lack of room is the runner's
503 with its `Retry-After`, passed on. The API server itself does not retry a call that
reached a runner (docs/reliability.md).

Errors (raised as API errors; the caller's error middleware renders them): 400 BadRequest
for a body that is not the envelope, a `timeout` that is not a duration or a criticality
that is not one; 503 ServiceUnavailable when the run has no ready
revision, or when the runner chosen (and one other, if there is one) cannot be reached; 504
Timeout (naming the apiserver) when the runner does not answer within the call's deadline,
at most the invoke timeout (`ServingLimits.invoke_timeout_seconds`, `--invoke-timeout`).
A connection failure is retried once on another endpoint (nothing was sent); a timeout is
not (the runner may be working on it).

`GET …/workflowruns/{name}/invocationlog` lists the last 100 invocations this API server
made for the run, oldest first (time, revision, endpoint, status, durationMs, cache; `path`
for proxied calls; `timingsMs`, the time of each hop — apiserver, runner, backend — for
answers that were not streams; `timeToFirstTokenMs` for streams that carried tokens;
`usage` — promptTokens, completionTokens and source, `reported` or `counted` — when the
answer carried one, see `plnt.api.usage`; `timePerOutputTokenMs` for streams of two
tokens or more: the mean time per token after the first; `spilledTo` for a call another
backend of the run's pool served, see `spilling`). Every logged call is also
recorded in the run's latency series (`latency`) and kept for `status.slo` (`attainment`). A
stream is logged when it ends, with the status its last line reports (499 when the caller
went away first). With `?watch=true` the log is followed (`invocationwatch`). The log's
old name, `…/invocations`, answers the same with a deprecation `Warning` header: since the
`Invocation` kind (plural `invocations`) exists, `invocationlog` keeps the two apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import yarl
from aiohttp import web

from plnt.api import codec, errors
from plnt.api.headers import (
    CACHE_CONTROL,
    CACHE_HEADER,
    FALLBACK_HEADER,
    RETRY_AFTER,
    REVISION_HEADER,
    SPILL_HEADER,
    CacheOutcome,
)
from plnt.api.invocations import InvalidInvokeRequest, InvokeRequest
from plnt.api.meta import now_rfc3339
from plnt.api.usage import Usage
from plnt.apiserver import keys, negotiation, params, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import (
    calllimits,
    invocationwatch,
    latency,
    relay,
    shadowing,
    traffic,
)
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.registry.store import ResourceStore

_PASSED_HEADERS = ("Content-Type", CACHE_HEADER, RETRY_AFTER, FALLBACK_HEADER)

_USAGE = b'"usage"'  # answers are decoded only when they may hold usage (or lack X-Plnt-Cache)
T = TypeVar("T")


async def upstream_context(app: web.Application) -> AsyncIterator[None]:
    """The pooled session to runners and the balancer, for the app's lifetime."""
    settings = app[keys.SETTINGS]
    seconds = settings.limits.invoke_timeout_seconds
    connector = aiohttp.TCPConnector(limit=1000, limit_per_host=0)
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=seconds),
        auto_decompress=False,
    )
    app[run_keys.UPSTREAM] = session
    app[run_keys.INVOKER] = traffic.Invoker()
    run_latency = app[run_keys.LATENCY] = latency.RunLatency(app[keys.METRICS].registry)
    run_latency.register()
    try:
        yield
    finally:
        run_latency.unregister()
        await session.close()


def _check_envelope(body: Any) -> None:
    """400 for a body the runner would refuse as not its envelope (`InvokeRequest`)."""
    try:
        InvokeRequest.parse(body)
    except InvalidInvokeRequest as error:
        raise errors.BadRequest(str(error)) from error


async def _payload(request: web.Request) -> bytes:
    """The bytes to forward: a JSON body is checked and passed on as it came (no re-encoding);
    a YAML body is decoded and sent on as JSON."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in ("", "application/json"):
        body, _ = await params.decode_object(request, limit=_limit(request))
        _check_envelope(body)
        return codec.dumps(body)
    data = await params.read_body(request, limit=_limit(request))
    try:
        body = codec.loads(data)
    except ValueError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error
    _check_envelope(body)
    return data


def _limit(request: web.Request) -> int:
    return request.app[keys.SETTINGS].max_request_body_bytes


@dataclass(frozen=True)
class Call:
    """What to send to a runner: method, path below its root, raw query, body, headers.

    `logged` says whether the call is an invocation for the log (a POST); `path` is
    recorded with it when `log_path` is set (proxied calls).
    """

    method: str
    path: str
    query: str = ""
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    logged: bool = True
    log_path: bool = False

    def url(self, endpoint: str) -> yarl.URL:
        query = f"?{self.query}" if self.query else ""
        return yarl.URL(f"{endpoint}{self.path}{query}", encoded=True)


class _Unreachable(Exception):
    """The runner at an endpoint could not be connected to (nothing was sent)."""


def _timeout(endpoint: str, error: BaseException) -> errors.Timeout:
    timeout = errors.Timeout(
        f"deadline exceeded at the apiserver: the runner at {endpoint} did not answer in time",
        retry_after_seconds=1,
    )
    timeout.__cause__ = error
    return timeout


@dataclass
class _Route:
    """Where one call is going: the revision, the endpoint, and time spent upstream."""

    targets: list[traffic.Target]
    target: traffic.Target
    endpoint: str
    began: float
    upstream_seconds: float = 0.0
    sent_at: float = 0.0
    shadow: shadowing.Window | None = None
    """The run's open shadow window, when the saga has one open (`status.traffic`)."""
    run: dict[str, Any] = field(default_factory=dict)
    """The run as routed (its `spec.calls` gives a call's defaults)."""
    spill: str | None = None
    """The pool's backend the call is to spill to (`spilling`), None: the run's own."""
    spilled_to: str | None = None
    """The backend the runner said it spilled the call to (its answer's header)."""

    def own_ms(self, now: float) -> float:
        """Time spent in the API server so far, the upstream time of finished tries excluded."""
        return max(0.0, (now - self.began - self.upstream_seconds) * 1000.0)


async def _with_failover(
    request: web.Request, info: RequestInfo, route: _Route, send: Callable[[str], Awaitable[T]]
) -> T:
    """`send(endpoint)` once, and once more on another endpoint if the first is unreachable."""
    balancer = request.app[run_keys.INVOKER].balancer
    failures: list[str] = []
    while True:
        sent = route.sent_at = time.perf_counter()
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


async def _routing_object(store: ResourceStore, info: RequestInfo) -> dict[str, Any]:
    """The run as routing needs it: the watch cache's copy, and the latest only when that
    copy has nothing to route to.

    A consistent read costs an etcd round trip per call (to learn the current revision),
    which is most of what an invocation spends in the API server besides HTTP. Routing
    does not need it: the cache already holds this server's own writes, and a
    `status.traffic` a few milliseconds old names runners that were serving a moment ago
    (one that went away since is failed over, as any unreachable endpoint is).
    Only when the cached copy is missing or has no ready revision, which a write through
    another API server may have changed a moment ago, is the latest read before answering
    404 or 503.
    """
    with contextlib.suppress(errors.NotFound):
        cached = await store.get(info.namespace, info.name, resource_version="0")
        if traffic.targets_of(cached.get("status")):
            return cached
    return await store.get(info.namespace, info.name)


async def _route(request: web.Request, store: ResourceStore, info: RequestInfo) -> _Route:
    """A revision by weight and, within it, the least busy endpoint; 503 when none is ready."""
    began = time.perf_counter()
    obj = await _routing_object(store, info)
    balancer = request.app[run_keys.INVOKER].balancer
    targets = traffic.targets_of(obj.get("status"))
    target = balancer.pick_target(targets)
    endpoint = None if target is None else balancer.pick_endpoint(target.endpoints)
    if target is None or endpoint is None:
        raise errors.ServiceUnavailable(
            f"workflowrun {info.name} has no ready revision", retry_after_seconds=1
        )
    shadow = shadowing.window_of(obj.get("status"))
    spiller = request.app.get(run_keys.SPILLER)
    spill = await spiller.target_for(obj) if spiller is not None else None
    return _Route(
        targets=targets,
        target=target,
        endpoint=endpoint,
        began=began,
        shadow=shadow,
        run=obj,
        spill=spill,
    )


async def forward(
    request: web.Request,
    store: ResourceStore,
    info: RequestInfo,
    call: Call,
    *,
    began: float,
) -> web.StreamResponse:
    """Send `call` to a runner of the run, by traffic weight, and answer what it answers.

    Streams are relayed as they come; other answers are read whole and answered with the
    revision, cache and timing headers. Raises API errors (503, 504) for the caller to render.
    """
    route = await _route(request, store, info)
    route.began = began
    limits = calllimits.call_limits(request, route.run, began=began)
    session = request.app[run_keys.UPSTREAM]
    headers = call.headers if route.spill is None else {**call.headers, SPILL_HEADER: route.spill}

    async def send(endpoint: str) -> web.StreamResponse | _Answer:
        if time.perf_counter() >= limits.deadline:
            raise errors.Timeout(
                "deadline exceeded at the apiserver: the call's time ran out before it was sent",
                retry_after_seconds=1,
            )
        try:
            async with session.request(
                call.method,
                call.url(endpoint),
                data=call.body or None,
                headers={**headers, **limits.headers()},
                timeout=limits.client_timeout(),
            ) as upstream:
                route.spilled_to = upstream.headers.get(SPILL_HEADER)
                media = upstream.headers.get("Content-Type", "")
                if upstream.status == 200 and relay.is_stream(media):
                    return await _relay(request, info, route, call, upstream)
                body = await upstream.read()
        except TimeoutError as error:
            raise _timeout(endpoint, error) from error
        except aiohttp.ClientConnectionError as error:
            raise _Unreachable(str(error) or type(error).__name__) from error
        passed = {h: upstream.headers[h] for h in _PASSED_HEADERS if h in upstream.headers}
        return _Answer(upstream.status, body, passed, upstream.headers.getall("Server-Timing", []))

    try:
        answer = await _with_failover(request, info, route, send)
    except errors.APIError as error:
        _log_route(request, info, route, call, error.code, CacheOutcome.OFF)
        raise
    if isinstance(answer, _Answer):
        return _buffered(request, info, route, call, answer)
    return answer


async def handle_invoke(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    began = time.perf_counter()
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    stream = relay.wants_stream(request)
    payload = await _payload(request)
    headers = {"Content-Type": "application/json"}
    if stream:
        headers["Accept"] = relay.NDJSON
    if CACHE_CONTROL in request.headers:  # the caller may bypass the step cache
        headers[CACHE_CONTROL] = request.headers[CACHE_CONTROL]
    call = Call("POST", "/invoke", "stream=true" if stream else "", payload, headers)
    return await forward(request, store, info, call, began=began)


@dataclass(frozen=True, slots=True)
class _Answer:
    """A runner's whole answer: status, body, the headers passed on, its Server-Timing."""

    status: int
    body: bytes
    passed: dict[str, str]
    timings: list[str]


def _buffered(
    request: web.Request, info: RequestInfo, route: _Route, call: Call, answer: _Answer
) -> web.Response:
    """The runner's whole answer, with the revision, cache and timing headers added (and the
    runner's `Retry-After` on a refusal, `X-Plnt-Fallback` when a fallback served)."""
    header = answer.passed.get(CACHE_HEADER)
    decoded = _decoded(answer.body) if header is None or _USAGE in answer.body else None
    cache = header or CacheOutcome.of_answer(decoded)
    own_ms = route.own_ms(time.perf_counter())
    hops = traffic.hop_timings(answer.timings, apiserver_ms=own_ms)
    usage = Usage.of_answer(decoded)
    _log_route(request, info, route, call, answer.status, cache, timings=hops, usage=usage)
    headers = {
        REVISION_HEADER: str(route.target.revision),
        CACHE_HEADER: cache,
        "Server-Timing": ", ".join([*answer.timings, f"apiserver;dur={own_ms:.3f}"]),
        "Content-Type": answer.passed.get("Content-Type", responses.JSON_CONTENT_TYPE),
    }
    headers |= {h: answer.passed[h] for h in (RETRY_AFTER, FALLBACK_HEADER) if h in answer.passed}
    _mirror(request, info, route, call, answer.status, body=answer.body)
    return web.Response(status=answer.status, body=answer.body, headers=headers)


async def _relay(
    request: web.Request,
    info: RequestInfo,
    route: _Route,
    call: Call,
    upstream: aiohttp.ClientResponse,
) -> web.StreamResponse:
    """Pass the runner's stream on chunk by chunk, then log how it ended.

    A failure after the stream began cannot change the status any more: it becomes the
    stream's last line (see `relay`). A caller that goes away (its handler is cancelled, or
    a write fails) is logged as 499, and leaving the unread upstream answer closes the
    runner connection, so the runner stops the invocation and its backend call.
    """
    own_ms = max(0.0, (route.sent_at - route.began - route.upstream_seconds) * 1000.0)
    out = relay.CoalescedStreamResponse(
        status=200,
        headers={
            "Content-Type": upstream.headers.get("Content-Type", ""),
            REVISION_HEADER: str(route.target.revision),
            "Cache-Control": "no-cache, private",
            "Server-Timing": f"apiserver;dur={own_ms:.3f}",
        },
    )
    outcome = relay.Outcome(relay.CLIENT_CLOSED)
    try:
        with contextlib.suppress(ConnectionError):
            await out.prepare(request)
            outcome = await relay.pass_through(upstream, out, route.endpoint)
    except asyncio.CancelledError:
        upstream.close()
        _log_route(request, info, route, call, relay.CLIENT_CLOSED, CacheOutcome.OFF)
        raise
    if outcome.status == relay.CLIENT_CLOSED:
        upstream.close()
    _log_route(
        request,
        info,
        route,
        call,
        outcome.status,
        outcome.cache,
        outcome.first_token_at,
        usage=outcome.usage,
        per_token_seconds=outcome.per_token_seconds(),
        gaps=outcome.token_gaps,
    )
    with contextlib.suppress(ConnectionError):
        await out.write_eof()
    _mirror(request, info, route, call, outcome.status, output=outcome.output)
    return out


def _mirror(
    request: web.Request,
    info: RequestInfo,
    route: _Route,
    call: Call,
    status: int,
    *,
    output: Any = None,
    body: bytes | None = None,
) -> None:
    """Offer an invocation the stable answered to the canary under shadow, if one is.

    Never blocks and does no I/O (the shadower's tasks send it), so the caller's answer
    does not wait for it; only invocations (`POST /invoke`) answered 200 by a revision
    other than the canary are offered, and only the window's sampled share is queued.
    """
    window = route.shadow
    if (
        window is None
        or status != 200
        or call.method != "POST"
        or call.path != "/invoke"
        or route.target.revision == window.revision
    ):
        return
    shadower = request.app[run_keys.SHADOWER]
    if not shadower.sampled(window):
        return
    shadower.offer(
        shadowing.Mirror(
            namespace=info.namespace,
            name=info.name,
            window=window,
            body=call.body,
            stable_revision=route.target.revision,
            stable_ms=(time.perf_counter() - route.began) * 1000.0,
            stable_output=output,
            stable_body=body,
        )
    )


def _decoded(answer: bytes) -> Any:
    """A runner's JSON answer decoded, for its `cache` (runners that send no cache header)
    and `usage` fields; None when it is not JSON."""
    try:
        return codec.loads(answer) if answer else None
    except ValueError:
        return None


def _log_route(
    request: web.Request,
    info: RequestInfo,
    route: _Route,
    call: Call,
    status: int,
    cache: str,
    first_token_at: float | None = None,
    *,
    timings: dict[str, float] | None = None,
    usage: Usage | None = None,
    per_token_seconds: float | None = None,
    gaps: tuple[float, ...] = (),
) -> None:
    """Record one invocation in the log and the run's latency series (calls that are not
    invocations are neither)."""
    if not call.logged:
        return
    entry: dict[str, Any] = {
        "time": now_rfc3339(),
        "revision": route.target.revision,
        "endpoint": route.endpoint,
        "status": status,
        "durationMs": round((time.perf_counter() - route.began) * 1000.0, 3),
        "cache": cache,
    }
    if call.log_path:
        entry["path"] = call.path
    if timings:
        entry["timingsMs"] = timings
    if first_token_at is not None:
        entry["timeToFirstTokenMs"] = round((first_token_at - route.began) * 1000.0, 3)
    if per_token_seconds is not None:
        entry["timePerOutputTokenMs"] = round(per_token_seconds * 1000.0, 3)
    if usage is not None:
        entry["usage"] = usage.to_log()
    if route.spilled_to is not None:
        entry["spilledTo"] = route.spilled_to
        request.app[run_keys.SPILLER].count(info.namespace, info.name, route.spilled_to)
    request.app[run_keys.LATENCY].observe(info.namespace, info.name, entry, gaps=gaps)
    request.app[run_keys.INVOKER].log.record(info.namespace, info.name, entry)


LOG_DEPRECATION = (
    "plnt.work/v1 WorkflowRun subresource invocations is deprecated; use invocationlog"
    " (invocations now names the Invocation kind)"
)


async def handle_invocation_log(
    request: web.Request,
    store: ResourceStore,
    info: RequestInfo,
    *,
    warnings: tuple[str, ...] = (),
) -> web.StreamResponse:
    """`GET …/invocationlog`: the log (followed with `?watch=true`), with `warnings`."""
    if info.verb != "get":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    await store.get(info.namespace, info.name)  # 404 for a run that does not exist
    if params.wants_watch(request.query):
        return await invocationwatch.serve(request, info, warnings=warnings)
    return responses.json_response(
        {
            "kind": "WorkflowRunInvocationList",
            "apiVersion": store.definition.api_version,
            "metadata": {},
            "items": request.app[run_keys.INVOKER].log.entries(info.namespace, info.name),
        },
        warnings=warnings,
    )


async def handle_deprecated_invocation_log(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    """`GET …/invocations`: the log under its old name, with a deprecation warning."""
    return await handle_invocation_log(request, store, info, warnings=(LOG_DEPRECATION,))
