"""The runner's own endpoints: `POST /invoke`, `/healthz`, `/readyz` and `/metrics`.

`POST /invoke` takes `{"inputs": {...}}` (the envelope leaves room for options later and
matches the API server's invoke subresource) and answers the output, the per-step trace,
cache statistics and timings, with a `Server-Timing` header on every answer.
"""

from __future__ import annotations

import time
from typing import Any

import prometheus_client
from aiohttp import web

from plnt.runner import errors, executing, keys, responses


async def execute(app: web.Application, inputs: Any, *, endpoint: str) -> executing.Execution:
    """Validate inputs and run the workflow once, recording metrics for `endpoint`."""
    metrics = app[keys.METRICS]
    executor = app[keys.EXECUTOR]
    metrics.in_flight.inc()
    began = time.perf_counter()
    try:
        validated = executor.validate_inputs(inputs)
        execution = await executor.run(validated)
    except errors.RunnerError as error:
        metrics.invocations.labels(endpoint, "error").inc()
        metrics.errors.labels(error.type).inc()
        raise
    finally:
        metrics.in_flight.dec()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - began)
    metrics.invocations.labels(endpoint, "ok").inc()
    return execution


def cache_stats(app: web.Application, execution: executing.Execution) -> dict[str, Any]:
    """This invocation's hits and misses, and the cache's size and bounds."""
    cache = app[keys.CACHE]
    return {
        "hits": execution.cache_hits,
        "misses": execution.cache_misses,
        "entries": len(cache),
        "maxEntries": cache.max_entries,
        "ttlSeconds": cache.ttl_seconds,
        "totalHits": cache.hits,
        "totalMisses": cache.misses,
    }


async def invoke(request: web.Request) -> web.StreamResponse:
    """POST /invoke: run the workflow on `{"inputs": {...}}`."""
    began = time.perf_counter()
    body = await responses.read_json(request)
    if not isinstance(body, dict) or "inputs" not in body or set(body) - {"inputs"}:
        raise errors.InvalidRequest('the body must be a JSON object {"inputs": {...}}')
    try:
        execution = await execute(request.app, body["inputs"], endpoint="invoke")
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    workflow = request.app[keys.WORKFLOW]
    payload = {
        "workflow": {"name": workflow.metadata.name, "version": workflow.metadata.version},
        "output": execution.output,
        "trace": [step.to_json() for step in execution.trace],
        "cache": cache_stats(request.app, execution),
        "timings": {
            "totalMs": round(execution.total_ms, 3),
            "runnerMs": round(execution.runner_ms, 3),
            "backendMs": round(execution.backend_ms, 3),
        },
    }
    headers = {
        "Server-Timing": responses.timing_of(execution),
        "X-Plnt-Cache": cache_outcome(execution.cache_hits, execution.cache_misses),
    }
    return web.json_response(payload, headers=headers)


def cache_outcome(hits: int, misses: int) -> str:
    """`hit` (every cached step hit), `miss` (none did), `partial`, or `off` (nothing cached).

    Sent as `X-Plnt-Cache` so a proxy can report it without parsing the body.
    """
    if hits + misses == 0:
        return "off"
    if misses == 0:
        return "hit"
    return "miss" if hits == 0 else "partial"


async def healthz(request: web.Request) -> web.StreamResponse:
    """Liveness: the process serves HTTP."""
    del request
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.StreamResponse:
    """Readiness: the spec is loaded and the backend client exists (and not shutting down)."""
    if not request.app[keys.READINESS].ready:
        return web.json_response({"status": "not ready"}, status=503)
    return web.json_response(
        {"status": "ready", "workflow": request.app[keys.WORKFLOW].metadata.name}
    )


async def metrics(request: web.Request) -> web.StreamResponse:
    """Prometheus text exposition of this app's registry."""
    registry = request.app[keys.METRICS].registry
    body = prometheus_client.generate_latest(registry)
    return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
