"""The runner's own endpoints: `POST /invoke`, `/healthz`, `/readyz` and `/metrics`.

Every endpoint runs in its call's context (the `call_context` middleware): the deadline
from `X-Plnt-Timeout-Ms` and the criticality from `X-Plnt-Criticality` (`plnt.api.headers`),
read by the executor and the guarded backend (`plnt.runner.deadlines`). A call whose time
is already up is answered 504 at once, naming the runner.

`POST /invoke` takes `{"inputs": {...}}`, optionally named by `apiVersion` and `kind`
(`plnt.api.invocations.InvokeRequest`: the envelope the API server's invoke subresource
checks and forwards unchanged, which leaves room for options later) and answers the
output, the per-step trace, cache statistics and timings, with a `Server-Timing` header
on every answer. `completedSteps` and `stepOutputs` (docs/invocations.md) let a durable
invocation resume on this replica what another began: the steps named are not run again,
and step lines carry outputs; `stepProgress` hands back what steps had done inside (forEach
elements, tool-loop turns and calls), which `progress` lines report (`plnt.runner.checkpointing`).

With `?stream=true` or `Accept: application/x-ndjson` it answers a stream instead (see
`plnt.runner.streaming`): one line per finished step, `delta` lines carrying the output
step's reply as the backend streams it, then the same body as a last line.
The body and the inputs are checked before the stream starts, so those errors are still
plain JSON answers with their status; a stream carries no `Server-Timing` or `X-Plnt-Cache`
header (they are known only at the end; the last line holds both facts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import prometheus_client
from aiohttp import web
from aiohttp.typedefs import Handler

from plnt.api import breakers as api_breakers
from plnt.api.headers import (
    CACHE_CONTROL,
    CRITICALITY_HEADER,
    TIMEOUT_HEADER,
    CacheMode,
    Criticality,
    InvalidTimeout,
    parse_time_left_ms,
)
from plnt.api.invocations import InvalidInvokeRequest, InvokeRequest
from plnt.runner import checkpointing, deadlines, errors, executing, keys, responses, streaming

log = logging.getLogger(__name__)


async def execute(
    app: web.Application,
    inputs: Any,
    *,
    endpoint: str,
    on_step: executing.StepListener | None = None,
    on_delta: executing.DeltaListener | None = None,
    on_valid: Callable[[], Awaitable[None]] | None = None,
    completed: Mapping[str, Any] | None = None,
    cache_mode: CacheMode = CacheMode.USE,
    checkpoint: checkpointing.Checkpoint | None = None,
) -> executing.Execution:
    """Validate inputs and run the workflow once, recording metrics for `endpoint`.

    `on_valid` is awaited once the inputs passed the schema, before any step runs;
    `on_step`, `on_delta`, `completed` (steps an earlier attempt finished), `cache_mode`
    (`cache_mode_of` the request) and `checkpoint` (what the earlier attempt did inside
    steps, and where this one reports it) are handed to the executor. An invocation cancelled
    because its caller went away counts with outcome `cancelled`.
    """
    metrics = app[keys.METRICS]
    executor = app[keys.EXECUTOR]
    metrics.in_flight.inc()
    began = time.perf_counter()
    try:
        deadlines.current().deadline.check("the runner")
        named = dict.fromkeys(checkpoint.steps() if checkpoint else ()) | dict(completed or {})
        if named:
            executor.check_completed(named)
        validated = executor.validate_inputs(inputs)
        if on_valid is not None:
            await on_valid()
        execution = await executor.run(
            validated,
            on_step=on_step,
            on_delta=on_delta,
            completed=completed,
            cache_mode=cache_mode,
            checkpoint=checkpoint,
        )
    except errors.RunnerError as error:
        metrics.invocations.labels(endpoint, "error").inc()
        metrics.errors.labels(error.type).inc()
        raise
    except asyncio.CancelledError:
        metrics.invocations.labels(endpoint, "cancelled").inc()
        raise
    finally:
        metrics.in_flight.dec()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - began)
    metrics.invocations.labels(endpoint, "ok").inc()
    if execution.first_token_ms is not None:
        metrics.first_token.labels(endpoint).observe(execution.first_token_ms / 1000.0)
    return execution


def cache_stats(app: web.Application, execution: executing.Execution) -> dict[str, Any]:
    """This invocation's hits and misses, and the cache's size and bounds."""
    cache = app[keys.CACHE]
    return {
        "hits": execution.cache_hits,
        "misses": execution.cache_misses,
        "bypassed": execution.cache_bypassed,
        "entries": len(cache),
        "maxEntries": cache.max_entries,
        "ttlSeconds": cache.ttl_seconds,
        "totalHits": cache.hits,
        "totalMisses": cache.misses,
    }


def call_context_of(request: web.Request) -> deadlines.CallContext:
    """The call's deadline (`X-Plnt-Timeout-Ms`, the time it had left when sent) and
    criticality (`X-Plnt-Criticality`); `InvalidRequest` naming the header for a bad value."""
    try:
        raw = request.headers.get(TIMEOUT_HEADER)
        left = parse_time_left_ms(raw) if raw is not None else None
        criticality = Criticality.of_header(request.headers.get(CRITICALITY_HEADER))
    except (InvalidTimeout, ValueError) as error:
        raise errors.InvalidRequest(str(error)) from error
    return deadlines.CallContext(deadlines.Deadline.after(left), criticality)


@web.middleware
async def call_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every endpoint runs in its call's context (`call_context_of`): the executor, the
    guarded backend and the backend client read the deadline and criticality from it."""
    token = deadlines.enter(call_context_of(request))
    try:
        return await handler(request)
    finally:
        deadlines.leave(token)


def cache_mode_of(request: web.Request) -> CacheMode:
    """Whether the caller let this call use the step cache (`Cache-Control: no-cache`
    bypasses it: `plnt.api.headers`)."""
    return CacheMode.of_cache_control(request.headers.get(CACHE_CONTROL))


def result_body(app: web.Application, execution: executing.Execution) -> dict[str, Any]:
    """What /invoke answers for a finished execution (and a stream's last line holds)."""
    workflow = app[keys.WORKFLOW]
    timings = {
        "totalMs": round(execution.total_ms, 3),
        "runnerMs": round(execution.runner_ms, 3),
        "backendMs": round(execution.backend_ms, 3),
    }
    if execution.first_token_ms is not None:
        timings["firstTokenMs"] = round(execution.first_token_ms, 3)
    body: dict[str, Any] = {
        "workflow": {"name": workflow.metadata.name, "version": workflow.metadata.version},
        "output": execution.output,
        "trace": [step.to_json() for step in execution.trace],
        "cache": cache_stats(app, execution),
        "timings": timings,
    }
    if execution.usage is not None:
        body["usage"] = execution.usage.to_json()
    if execution.fallback is not None:
        body["fallback"] = execution.fallback
    return body


async def invoke(request: web.Request) -> web.StreamResponse:
    """POST /invoke: run the workflow on the envelope's inputs (streamed when asked to)."""
    began = time.perf_counter()
    try:
        envelope = InvokeRequest.parse(await responses.read_json(request))
    except InvalidInvokeRequest as error:
        raise errors.InvalidRequest(str(error)) from error
    if streaming.wants_stream(request):
        return await invoke_stream(request, envelope, began=began)
    try:
        execution = await execute(
            request.app,
            envelope.inputs,
            endpoint="invoke",
            completed=_completed(envelope),
            cache_mode=cache_mode_of(request),
            checkpoint=checkpointing.Checkpoint.of(envelope, on_progress=None),
        )
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    payload = result_body(request.app, execution)
    return web.json_response(payload, headers=responses.headers_of(execution))


def _completed(envelope: InvokeRequest) -> dict[str, Any] | None:
    """The outputs of the steps an earlier attempt finished, by step id (or None)."""
    if not envelope.completed_steps:
        return None
    return {step: done.output for step, done in envelope.completed_steps.items()}


async def invoke_stream(
    request: web.Request, envelope: InvokeRequest, *, began: float
) -> web.StreamResponse:
    """The streamed /invoke: a JSON error before the first line, NDJSON lines after it."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": streaming.NDJSON, "Cache-Control": "no-cache"}
    )

    async def start() -> None:
        await response.prepare(request)

    writer = streaming.Writer(response)
    try:
        async with writer:
            try:
                execution = await execute(
                    request.app,
                    envelope.inputs,
                    endpoint="invoke",
                    on_step=lambda trace, error: writer.send(
                        streaming.step_line(trace, error, with_output=envelope.step_outputs)
                    ),
                    on_delta=lambda step, piece: writer.send(streaming.delta_line(step, piece)),
                    on_valid=start,
                    completed=_completed(envelope),
                    cache_mode=cache_mode_of(request),
                    checkpoint=checkpointing.Checkpoint.of(
                        envelope, on_progress=writer.send if envelope.step_outputs else None
                    ),
                )
            except errors.RunnerError as error:
                if not response.prepared:
                    raise
                writer.send(streaming.error_line(error))
            except Exception:
                if not response.prepared:
                    raise
                log.exception("unhandled error streaming %s", request.path)
                writer.send(streaming.error_line(errors.RunnerError("internal error")))
            else:
                writer.send(streaming.result_line(result_body(request.app, execution)))
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    return response


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


async def breakers(request: web.Request) -> web.StreamResponse:
    """The states of this runner's circuit breakers (its backend's and its fallback's):
    the backend prober writes them, aggregated over runners, to the PlntBackend's status."""
    report = api_breakers.RunnerBreakers(breakers=request.app[keys.GUARD].breaker_states())
    return web.json_response(report.to_wire())


async def metrics(request: web.Request) -> web.StreamResponse:
    """Prometheus text exposition of this app's registry."""
    registry = request.app[keys.METRICS].registry
    body = prometheus_client.generate_latest(registry)
    return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
