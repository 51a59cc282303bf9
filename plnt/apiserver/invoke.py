"""The `invoke` and `invocations` subresources: call a run's runners through the API server.

`POST …/workflowruns/{name}/invoke` with `{"inputs": {...}}` (the runner's own envelope)
picks a revision and endpoint from `status.traffic` (see `traffic.Balancer`), forwards
the body to `{endpoint}/invoke` over one pooled client session, and answers the runner's
status and body unchanged, adding `X-Plnt-Revision`, `X-Plnt-Cache` (hit, miss, partial
or off, from the answer's `cache.hits/misses`) and `Server-Timing` (the runner's entries
plus `apiserver;dur=` for the time spent here, upstream round trip excluded).
Authorization sees verb `create` on `workflowruns/invoke`, so a policy can grant
invoking without granting edits.

Errors (metav1.Status): 400 BadRequest for a body that is not the envelope; 503
ServiceUnavailable when the run has no ready revision, or when the runner chosen (and
one other, if there is one) cannot be reached; 504 Timeout when the runner does not
answer within the invoke timeout. A connection failure is retried once on another
endpoint; a timeout is not (the runner may be working on it).

`GET …/workflowruns/{name}/invocations` lists the last 100 invocations this API server
made for the run, oldest first (time, revision, endpoint, status, durationMs, cache).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from plnt.api import codec, errors
from plnt.api.meta import now_rfc3339
from plnt.apiserver import keys, negotiation, params, responses, traffic
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry.store import ResourceStore

_ENVELOPE = 'the invoke body must be a JSON object {"inputs": {...}}'
_PASSED_HEADERS = ("Content-Type", "X-Plnt-Cache")


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
        raise errors.Timeout(
            f"the runner at {endpoint} did not answer in time",
            retry_after_seconds=1,
        ) from error
    except aiohttp.ClientConnectionError as error:
        raise _Unreachable(str(error) or type(error).__name__) from error


async def handle_invoke(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    began = time.perf_counter()
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    payload = await _payload(request)
    obj = await store.get(info.namespace, info.name)
    invoker = request.app[keys.INVOKER]
    balancer = invoker.balancer
    targets = traffic.targets_of(obj.get("status"))
    target = balancer.pick_target(targets)
    endpoint = None if target is None else balancer.pick_endpoint(target.endpoints)
    if target is None or endpoint is None:
        raise errors.ServiceUnavailable(
            f"workflowrun {info.name} has no ready revision", retry_after_seconds=1
        )
    session = request.app[keys.UPSTREAM]
    upstream = 0.0
    failures: list[str] = []
    status, answer = 0, b""
    passed: dict[str, str] = {}
    timings: list[str] = []
    try:
        while True:
            sent = time.perf_counter()
            try:
                with balancer.track(endpoint):
                    status, answer, passed, timings = await _forward(session, endpoint, payload)
                upstream += time.perf_counter() - sent
                break
            except _Unreachable as error:
                upstream += time.perf_counter() - sent
                failures.append(f"{endpoint}: {error}")
                retry = None if len(failures) > 1 else balancer.fallback(targets, target, endpoint)
                if retry is None:
                    raise errors.ServiceUnavailable(
                        f"workflowrun {info.name}: the runner could not be reached "
                        f"({'; '.join(failures)})",
                        retry_after_seconds=1,
                    ) from error
                endpoint = retry
                target = next((t for t in targets if endpoint in t.endpoints), target)
    except errors.APIError as error:
        _log(request, info, target.revision, endpoint, error.code, began, "off")
        raise
    cache = passed.pop("X-Plnt-Cache", None) or _cache_from_body(answer)
    total_ms = _log(request, info, target.revision, endpoint, status, began, cache)
    own_ms = max(0.0, total_ms - upstream * 1000.0)
    headers = {
        "X-Plnt-Revision": str(target.revision),
        "X-Plnt-Cache": cache,
        "Server-Timing": ", ".join([*timings, f"apiserver;dur={own_ms:.3f}"]),
        "Content-Type": passed.get("Content-Type", responses.JSON_CONTENT_TYPE),
    }
    return web.Response(status=status, body=answer, headers=headers)


def _cache_from_body(answer: bytes) -> str:
    """The cache outcome from the answer's `cache` field (runners that send no header)."""
    try:
        decoded = codec.loads(answer) if answer else None
    except ValueError:
        decoded = None
    return traffic.cache_outcome(decoded)


def _log(
    request: web.Request,
    info: RequestInfo,
    revision: int,
    endpoint: str,
    status: int,
    began: float,
    cache: str,
) -> float:
    """Record one invocation; returns its duration in milliseconds."""
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
