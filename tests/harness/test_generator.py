"""The load generator against real aiohttp servers on loopback: what it counts and how.

The stand-ins answer like a runner (`/invoke` with a trace, cache counts and
Server-Timing; `/metrics` with the runner's cache counters), fail on purpose (404, 500,
too slow, connection closed), stream NDJSON with `delta` lines, or stall every request
for a known time once. Assertions are on counts and on lower bounds the stall itself
sets, never on how fast this machine is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.harness import BenchResult, Endpoint, LoadPlan, PlanError, Progress, run
from plnt.harness.generator import streaming
from tests.support.llm import Gpu, serving_llm

BODY = {
    "output": "ok",
    "trace": [
        {"id": "greet", "kind": "transform", "durationMs": 0.25, "cache": "hit"},
        {"id": "call", "kind": "http", "durationMs": 1.5, "cache": "miss"},
    ],
    "cache": {"hits": 1, "misses": 1},
    "timings": {"totalMs": 2.0, "runnerMs": 1.0, "backendMs": 1.0},
}


@dataclass
class StandIn:
    """What the stand-in saw, and the knobs a test turns."""

    url: str = ""
    invocations: int = 0
    stall_at: int | None = None  # the invocation that starts the stall
    stall_seconds: float = 0.0
    stalled_until: float = 0.0
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    async def hold(self) -> None:
        """Answer no sooner than the stand-in closes: no handler outlives its server."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closing.wait(), 30)


def _app(stand_in: StandIn) -> web.Application:
    async def invoke(request: web.Request) -> web.StreamResponse:
        await request.read()
        stand_in.invocations += 1
        now = time.monotonic()
        if stand_in.invocations == stand_in.stall_at:
            stand_in.stalled_until = now + stand_in.stall_seconds
        if now < stand_in.stalled_until:  # a server-wide pause: everything waits it out
            await asyncio.sleep(stand_in.stalled_until - now)
        return web.json_response(
            BODY, headers={"Server-Timing": "runner;dur=1.000, backend;dur=1.000"}
        )

    async def metrics(request: web.Request) -> web.Response:
        # Counters as prometheus_client writes them: 3 hits and 1 miss per invocation.
        lines = [
            "# HELP plnt_runner_cache_hits_total Step cache hits.",
            "# TYPE plnt_runner_cache_hits_total counter",
            f"plnt_runner_cache_hits_total {3.0 * stand_in.invocations}",
            "# HELP plnt_runner_cache_misses_total Step cache misses.",
            "# TYPE plnt_runner_cache_misses_total counter",
            f"plnt_runner_cache_misses_total {1.0 * stand_in.invocations}",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def not_found(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "no"}}, status=404)

    async def broken(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "boom"}}, status=500)

    async def slow(request: web.Request) -> web.Response:
        await stand_in.hold()
        return web.json_response(BODY)

    async def hang_up(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        await stand_in.hold()
        return web.json_response(BODY)

    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(
            headers={"Content-Type": "application/x-ndjson", "Server-Timing": "apiserver;dur=0.2"}
        )
        await response.prepare(request)
        for piece in ("one", " two", " three", " four"):
            await response.write(
                json.dumps({"type": "delta", "step": "s", "content": piece}).encode() + b"\n"
            )
            await asyncio.sleep(0.005)
        last = {"type": "result", **BODY, "usage": {"completion_tokens": 4}}
        await response.write(json.dumps(last).encode() + b"\n")
        await response.write_eof()
        return response

    async def stream_error(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        error = {"type": "error", "error": {"message": "backend down"}, "status": 502}
        await response.write(json.dumps(error).encode() + b"\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/invoke", invoke)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/404", not_found)
    app.router.add_post("/500", broken)
    app.router.add_post("/slow", slow)
    app.router.add_post("/hang-up", hang_up)
    app.router.add_post("/stream", stream)
    app.router.add_post("/stream-error", stream_error)
    return app


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[StandIn]:
    stand_in = StandIn()
    server = TestServer(_app(stand_in), host="127.0.0.1")
    await server.start_server()
    stand_in.url = str(server.make_url("")).rstrip("/")
    try:
        yield stand_in
    finally:
        stand_in.closing.set()
        await server.close()


def by_label(results: list[BenchResult]) -> dict[str, BenchResult]:
    return {result.label: result for result in results}


async def test_a_stall_shows_in_the_open_loops_p99_and_hides_in_a_closed_loops() -> None:
    stall = 0.8
    async with serving() as stand_in:
        stand_in.stall_at, stand_in.stall_seconds = 20, stall
        closed = await run(
            LoadPlan(duration_seconds=2.5, concurrency=1), [Endpoint("x", f"{stand_in.url}/invoke")]
        )
        stand_in.invocations, stand_in.stalled_until = 0, 0.0
        opened = await run(
            LoadPlan(duration_seconds=2.5, rate=100.0), [Endpoint("x", f"{stand_in.url}/invoke")]
        )
    uncorrected, corrected = closed[0].latency, opened[0].latency
    # The closed loop sent nothing while its one request waited: one slow sample among many.
    assert uncorrected.max_ms >= stall * 1000.0
    assert closed[0].requests > 200, closed[0].requests
    assert uncorrected.p99_ms < stall * 1000.0 / 2, uncorrected
    # The open loop kept its schedule: ~80 of its 250 requests were due during the stall
    # and each is charged from its scheduled instant.
    assert opened[0].requests == 250
    assert corrected.p99_ms >= stall * 1000.0 * 0.9, corrected
    assert corrected.p90_ms >= stall * 1000.0 * 0.2, corrected


async def test_each_failure_is_counted_in_its_class() -> None:
    async with serving() as stand_in:
        plan = LoadPlan(duration_seconds=60, concurrency=2, requests=4, timeout_seconds=0.3)
        labels = {"ok": "invoke", "4xx": "404", "5xx": "500", "timeout": "slow"}
        labels["connection"] = "hang-up"
        results = by_label(
            await run(plan, [Endpoint(k, f"{stand_in.url}/{path}") for k, path in labels.items()])
        )
    assert results["ok"].errors == {"4xx": 0, "5xx": 0, "timeout": 0, "connection": 0}
    assert results["ok"].error_rate == 0.0 and results["ok"].latency.count == 4
    for kind in ("4xx", "5xx", "timeout", "connection"):
        result = results[kind]
        assert result.requests == 4, kind
        assert result.errors[kind] == 4, (kind, result.errors)
        assert sum(result.errors.values()) == 4, (kind, result.errors)
        assert result.error_rate == 1.0
        assert result.latency.count == 0  # latency covers successful requests only


async def test_a_refused_connection_is_a_connection_error() -> None:
    async with serving() as stand_in:
        url = stand_in.url
    plan = LoadPlan(duration_seconds=60, concurrency=1, requests=3, timeout_seconds=5)
    [result] = await run(plan, [Endpoint("gone", f"{url}/invoke")])
    assert result.errors["connection"] == 3 and result.error_rate == 1.0


async def test_steps_hops_and_cache_come_from_the_trace_the_header_and_the_counters() -> None:
    async with serving() as stand_in:
        endpoint = Endpoint(
            "runner", f"{stand_in.url}/invoke", runner_metrics_urls=(f"{stand_in.url}/metrics",)
        )
        plain = Endpoint("plain", f"{stand_in.url}/invoke")
        plan = LoadPlan(duration_seconds=60, concurrency=2, requests=10)
        results = by_label(await run(plan, [endpoint, plain]))
    runner = results["runner"]
    assert set(runner.steps) == {"greet", "call"}
    assert runner.steps["call"].count == 10
    assert runner.steps["call"].p50_ms == pytest.approx(1.5, rel=0.001)
    assert set(runner.hops) == {"runner", "backend"}
    assert runner.hops["runner"].p99_ms == pytest.approx(1.0, rel=0.001)
    # The counters moved by 3 hits : 1 miss for every invocation, both labels' included.
    assert runner.cache_hit_rate == pytest.approx(0.75) and runner.cache_reason is None
    # Without a metrics URL the answers' own counts are used (1 hit : 1 miss).
    assert results["plain"].cache_hit_rate == pytest.approx(0.5)


async def test_streams_give_time_to_first_token_and_tokens_per_second() -> None:
    async with serving() as stand_in:
        plan = LoadPlan(duration_seconds=60, concurrency=2, requests=6)
        results = by_label(
            await run(
                plan,
                [
                    Endpoint("stream", f"{stand_in.url}/stream?stream=true"),
                    Endpoint("failing", f"{stand_in.url}/stream-error?stream=true"),
                ],
            )
        )
    streamed = results["stream"]
    assert streamed.error_rate == 0.0
    assert streamed.time_to_first_token is not None
    assert streamed.time_to_first_token.count == 6
    assert streamed.time_to_first_token.p50_ms <= streamed.latency.p50_ms
    # three tokens after the first, at least 15 ms of pauses between them
    assert streamed.tokens_per_second is not None and 0 < streamed.tokens_per_second <= 200
    assert set(streamed.hops) == {"apiserver", "runner", "backend"}
    assert streamed.steps["call"].count == 6
    assert results["failing"].errors["5xx"] == 6


async def test_without_a_backend_metrics_url_gpu_is_none_with_the_reason() -> None:
    async with serving() as stand_in:
        plan = LoadPlan(duration_seconds=60, concurrency=1, requests=2)
        [result] = await run(plan, [Endpoint("x", f"{stand_in.url}/invoke")])
    assert result.gpu_utilization is None
    assert result.gpu_reason is not None and "no backend metrics URL" in result.gpu_reason
    assert result.kv_cache_usage is None


async def test_gpu_utilisation_is_read_from_a_dcgm_exporter_and_kv_cache_from_vllm() -> None:
    async with serving() as stand_in, serving_llm(None) as llm:
        llm.gpus = [Gpu(80.0, 1000.0, 2000.0), Gpu(40.0, 500.0, 2500.0)]
        llm.kv_cache = 0.25
        plan = LoadPlan(duration_seconds=0.5, concurrency=1)
        results = by_label(
            await run(
                plan,
                [
                    Endpoint(
                        "dcgm",
                        f"{stand_in.url}/invoke",
                        backend_metrics_url=f"{llm.root}/dcgm/metrics",
                    ),
                    Endpoint(
                        "vllm", f"{stand_in.url}/invoke", backend_metrics_url=f"{llm.root}/metrics"
                    ),
                    Endpoint(
                        "missing",
                        f"{stand_in.url}/invoke",
                        backend_metrics_url=f"{llm.root}/nothing",
                    ),
                ],
            )
        )
    assert results["dcgm"].gpu_utilization == pytest.approx(60.0)
    assert results["dcgm"].gpu_reason is None
    assert results["vllm"].kv_cache_usage == pytest.approx(25.0)
    assert results["vllm"].gpu_utilization is None
    assert "DCGM_FI_DEV_GPU_UTIL" in (results["vllm"].gpu_reason or "")
    assert results["missing"].gpu_utilization is None
    assert "HTTP 404" in (results["missing"].gpu_reason or "")


async def test_an_open_loop_schedules_exactly_rate_times_duration_and_reports_progress() -> None:
    seen: list[Progress] = []
    async with serving() as stand_in:
        plan = LoadPlan(
            duration_seconds=1.5, warmup_seconds=0.5, rate=40.0, inputs=({"a": 1}, {"a": 2})
        )
        [result] = await run(plan, [Endpoint("x", f"{stand_in.url}/invoke")], progress=seen.append)
        sent = stand_in.invocations
    assert result.requests == 60  # the measured phase's share of the schedule
    assert sent == 80  # warm-up requests were sent, not recorded
    assert result.requested_rate == 40.0 and result.achieved_rate > 0
    assert result.generator_cpu_seconds > 0 and result.generator_cpu_ratio > 0
    assert seen and seen[-1].requests == 60 and seen[-1].label == "x"


async def test_replicas_sharing_a_label_split_the_requests_round_robin() -> None:
    async with serving() as first, serving() as second:
        plan = LoadPlan(duration_seconds=60, concurrency=2, requests=10)
        endpoints = [
            Endpoint("rev", f"{first.url}/invoke"),
            Endpoint("rev", f"{second.url}/invoke"),
        ]
        [result] = await run(plan, endpoints)
        assert (first.invocations, second.invocations) == (5, 5)
    assert result.requests == 10


def test_a_result_survives_its_json_form() -> None:
    async def bench() -> BenchResult:
        async with serving() as stand_in:
            plan = LoadPlan(duration_seconds=60, concurrency=1, requests=3)
            [result] = await run(plan, [Endpoint("x", f"{stand_in.url}/invoke")])
        return result

    result = asyncio.run(bench())
    document = json.loads(json.dumps(result.to_json()))
    assert "p95Ms" in document["latency"] and "cacheHitRate" in document
    assert BenchResult.from_json(document) == result


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"rate": 1.0, "concurrency": 1},
        {"rate": 0.0},
        {"concurrency": 0},
        {"rate": 1.0, "inputs": ()},
    ],
)
def test_a_plan_needs_exactly_one_positive_rate_or_concurrency(fields: dict[str, object]) -> None:
    with pytest.raises(PlanError):
        LoadPlan(duration_seconds=1.0, **fields)  # type: ignore[arg-type]


def test_stream_true_in_the_query_asks_for_the_stream() -> None:
    assert streaming("http://h/invoke?stream=true")
    assert not streaming("http://h/invoke?revision=2")


async def test_an_open_loop_behind_a_stuck_server_times_out_from_the_due_instant() -> None:
    async with serving() as stand_in:
        # Every answer takes 30 s; each request may take 0.3 s from its due instant. The
        # 32 senders are all stuck at once, so most requests go out late with what is left
        # of their 0.3 s, or not at all once it is spent: the run ends soon after the window
        # instead of draining a backlog for minutes.
        plan = LoadPlan(duration_seconds=1.0, rate=100.0, timeout_seconds=0.3)
        [result] = await run(plan, [Endpoint("stuck", f"{stand_in.url}/slow")])
    assert result.requests == 100
    assert result.errors["timeout"] == 100 and result.error_rate == 1.0
    assert result.achieved_rate == 0.0  # no answer came back at all
