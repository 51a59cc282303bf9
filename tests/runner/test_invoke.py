"""POST /invoke over real HTTP: concurrency, the cache, inputs errors, limits, timing, metrics."""

from __future__ import annotations

import json

import aiohttp
import pytest

from plnt.runner import settings
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_fanout_steps_overlap_in_time_and_the_join_starts_after_both(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    backend = settings.BackendConfig(type="echo", latency_ms=200)
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml", backend=backend)
    async with session.post(f"{url}/invoke", json={"inputs": {"topic": "etcd"}}) as response:
        assert response.status == 200
        body = await response.json()
    trace = {step["id"]: step for step in body["trace"]}
    pros, cons, join = trace["pros"], trace["cons"], trace["join"]
    # Both fan-out steps started before either finished: they ran at the same time.
    assert max(pros["startedMs"], cons["startedMs"]) < min(pros["finishedMs"], cons["finishedMs"])
    assert join["startedMs"] >= max(pros["finishedMs"], cons["finishedMs"])
    assert body["output"] == {
        "topic": "etcd",
        "pros": "List the strengths of etcd for engineers.",
        "cons": "List the weaknesses of etcd for engineers.",
    }


async def test_second_identical_invocation_is_served_from_the_step_cache(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    payload = {"inputs": {"topic": "raft"}}
    async with session.post(f"{url}/invoke", json=payload) as response:
        first = await response.json()
        assert response.headers["X-Plnt-Cache"] == "miss"
    async with session.post(f"{url}/invoke", json=payload) as response:
        second = await response.json()
        assert response.headers["X-Plnt-Cache"] == "hit"
    assert first["cache"]["hits"] == 0 and first["cache"]["misses"] == 3
    assert second["cache"]["hits"] == 3 and second["cache"]["misses"] == 0
    assert {step["cache"] for step in second["trace"]} == {"hit"}
    assert second["output"] == first["output"]
    async with session.post(f"{url}/invoke", json={"inputs": {"topic": "paxos"}}) as response:
        third = await response.json()
    assert third["cache"]["misses"] == 3


@pytest.mark.parametrize(
    "cache_control", ["no-cache", "no-store", "max-age=0, No-Cache", "private,no-store=x"]
)
async def test_a_call_asking_no_cache_runs_every_step_and_neither_reads_nor_writes_the_cache(
    start_runner: StartRunner, session: aiohttp.ClientSession, cache_control: str
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    payload = {"inputs": {"topic": "raft"}}
    bypass = {"Cache-Control": cache_control}
    async with session.post(f"{url}/invoke", json=payload) as response:
        assert response.headers["X-Plnt-Cache"] == "miss"  # now cached
    for path, body in (("/invoke", payload), ("/invoke?stream=true", payload)):
        async with session.post(f"{url}{path}", json=body, headers=bypass) as response:
            assert response.status == 200
            if "stream" in path:
                lines = [json.loads(line) async for line in response.content if line.strip()]
                answer = lines[-1]
            else:
                assert response.headers["X-Plnt-Cache"] == "bypass"
                answer = await response.json()
        assert answer["cache"]["hits"] == answer["cache"]["misses"] == 0
        assert answer["cache"]["bypassed"] == 3
        assert {step["cache"] for step in answer["trace"]} == {"bypass"}
    # Nothing written either: a new input asked with no-cache is still a miss afterwards.
    fresh = {"inputs": {"topic": "paxos"}}
    async with session.post(f"{url}/invoke", json=fresh, headers=bypass) as response:
        assert response.headers["X-Plnt-Cache"] == "bypass"
    async with session.post(f"{url}/invoke", json=fresh) as response:
        assert response.headers["X-Plnt-Cache"] == "miss"
    async with session.post(f"{url}/invoke", json=payload) as response:
        assert response.headers["X-Plnt-Cache"] == "hit"  # a plain call still uses it


async def test_the_openai_endpoints_take_no_cache_from_the_request_too(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    chat = {"model": "chat", "messages": [{"role": "user", "content": "hello?"}]}
    async with session.post(f"{url}/v1/chat/completions", json=chat) as response:
        assert response.status == 200, await response.text()
    async with session.post(f"{url}/v1/chat/completions", json=chat) as response:
        assert response.headers["X-Plnt-Cache"] == "hit"
    bypass = {"Cache-Control": "no-cache"}
    async with session.post(f"{url}/v1/chat/completions", json=chat, headers=bypass) as response:
        assert response.headers["X-Plnt-Cache"] == "bypass"
        assert {step["cache"] for step in (await response.json())["plnt"]["trace"]} <= {
            "bypass",
            "off",
        }


async def test_inputs_failing_the_schema_get_422_naming_each_path(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    async with session.post(f"{url}/invoke", json={"inputs": {"audience": 7}}) as response:
        assert response.status == 422
        body = await response.json()
    paths = [problem["path"] for problem in body["error"]["problems"]]
    assert paths == ["$.audience", "$.topic"]
    assert "$.topic" in body["error"]["message"] and "$.audience" in body["error"]["message"]
    assert "Server-Timing" in response.headers


async def test_a_body_naming_its_api_version_and_kind_is_run_like_the_bare_envelope(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    body = {"apiVersion": "plnt.work/v1", "kind": "WorkflowRunInvocationRequest"}
    async with session.post(f"{url}/invoke", json={**body, "inputs": {"question": "hi"}}) as reply:
        assert reply.status == 200, await reply.text()
        assert (await reply.json())["output"] == "hi"
    async with session.post(f"{url}/invoke", json={**body, "input": {}}) as reply:
        assert reply.status == 400
        assert '{"inputs"' in (await reply.json())["error"]["message"]


async def test_a_body_without_the_inputs_envelope_is_a_400_with_a_json_message(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    async with session.post(f"{url}/invoke", json={"question": "hi"}) as response:
        assert response.status == 400
        assert '{"inputs"' in (await response.json())["error"]["message"]
    async with session.post(f"{url}/invoke", data=b"{not json") as response:
        assert response.status == 400
        assert "not valid JSON" in (await response.json())["error"]["message"]


async def test_bodies_over_the_limit_are_refused_with_413(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml", max_body_bytes=1024)
    payload = {"inputs": {"question": "x" * 4096}}
    async with session.post(f"{url}/invoke", json=payload) as response:
        assert response.status == 413
        body = await response.json()
    assert "1024" in body["error"]["message"]


async def test_every_invoke_response_splits_runner_and_backend_time_in_server_timing(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    backend = settings.BackendConfig(type="echo", latency_ms=20)
    url = await start_runner(EXAMPLES / "chat.workflow.yaml", backend=backend)
    async with session.post(f"{url}/invoke", json={"inputs": {"question": "q"}}) as response:
        timing = response.headers["Server-Timing"]
        body = await response.json()
    parts = dict(part.strip().split(";dur=") for part in timing.split(","))
    assert set(parts) == {"runner", "backend"}
    assert float(parts["backend"]) >= 20.0  # the echo backend waited at least this long
    assert body["timings"]["backendMs"] == round(float(parts["backend"]), 3)


async def test_metrics_count_invocations_errors_and_cache_results(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    for _ in range(2):
        async with session.post(f"{url}/invoke", json={"inputs": {"question": "q"}}) as response:
            assert response.status == 200
    async with session.post(f"{url}/invoke", json={"inputs": {}}) as response:
        assert response.status == 422
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    assert _metric(text, 'plnt_runner_invocations_total{endpoint="invoke",outcome="ok"}') == 2
    assert _metric(text, 'plnt_runner_invocations_total{endpoint="invoke",outcome="error"}') == 1
    assert _metric(text, "plnt_runner_cache_hits_total") == 1
    assert _metric(text, "plnt_runner_cache_misses_total") == 1
    assert _metric(text, 'plnt_runner_errors_total{type="invalid_inputs"}') == 1
    assert _metric(text, 'plnt_runner_invocation_seconds_count{endpoint="invoke"}') == 3
    assert 'plnt_runner_step_seconds_count{cache="hit",kind="model",step="answer"}' in text
    assert _metric(text, "plnt_runner_in_flight") == 0
    # One backend call (the cache answered the second invocation), nothing failed yet.
    backend = "plnt_runner_backend_request_duration_seconds_count"
    assert _metric(text, f'{backend}{{kind="model",outcome="ok"}}') == 1
    assert _metric(text, f'{backend}{{kind="model",outcome="error"}}') == 0
    assert _metric(text, 'plnt_runner_invocations_total{endpoint="chat",outcome="ok"}') == 0


async def test_health_readiness_and_unknown_paths_answer_json(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    async with session.get(f"{url}/healthz") as response:
        assert response.status == 200
    async with session.get(f"{url}/readyz") as response:
        assert (await response.json())["workflow"] == "chat"
    async with session.get(f"{url}/nope") as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == 404
