"""POST /invoke as an NDJSON stream: a line per finished step as it finishes, then the result."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from plnt.runner import settings
from tests.support.examples import EXAMPLES
from tests.support.gate import Gate, gated_workflow, serving_gate
from tests.support.runners import StartRunner, read_lines

DEADLINE_SECONDS = 20.0
NDJSON = "application/x-ndjson"


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    """An HTTP target that holds each request until released: (url, arrived, release)."""
    async with serving_gate() as served:
        yield served


def two_steps(target: str, route: str) -> str:
    return gated_workflow(f"{target}/{route}")


async def test_fanout_streams_both_parallel_steps_before_the_join_and_the_result_last(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    backend = settings.BackendConfig(type="echo", latency_ms=50)
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml", backend=backend)
    async with session.post(
        f"{url}/invoke", params={"stream": "true"}, json={"inputs": {"topic": "etcd"}}
    ) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == NDJSON
        assert "Server-Timing" not in response.headers
        lines = await read_lines(response)
    assert [line["type"] for line in lines] == ["step", "step", "step", "result"]
    steps = [line["step"]["id"] for line in lines[:3]]
    assert set(steps[:2]) == {"pros", "cons"} and steps[2] == "join"
    result = lines[-1]
    assert result["output"]["pros"] == "List the strengths of etcd for engineers."
    # Each step line is the trace entry the result holds for that step.
    assert [line["step"] for line in lines[:3]] == sorted(
        result["trace"], key=lambda entry: steps.index(entry["id"])
    )
    assert result["cache"]["misses"] == 3 and result["workflow"]["name"] == "fanout"
    assert set(result["timings"]) == {"totalMs", "runnerMs", "backendMs"}


async def test_a_step_line_arrives_while_a_later_step_is_still_running(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    gate: tuple[str, asyncio.Event, asyncio.Event],
) -> None:
    target, arrived, release = gate
    url = await start_runner(write_spec(two_steps(target, "hold")))
    async with session.post(
        f"{url}/invoke", headers={"Accept": NDJSON}, json={"inputs": {"who": "ada"}}
    ) as response:
        assert response.status == 200
        async with asyncio.timeout(DEADLINE_SECONDS):
            first = json.loads(await response.content.readline())
            await arrived.wait()
        assert first["type"] == "step" and first["step"]["id"] == "greet"
        assert not release.is_set()  # `call` is held at the target: the line came first
        release.set()
        rest = await read_lines(response)
    assert [(line["type"], line.get("step", {}).get("id")) for line in rest] == [
        ("step", "call"),
        ("result", None),
    ]
    assert rest[-1]["output"] == ["hello ada", {"opened": True}]


async def test_a_step_failing_after_the_stream_began_ends_it_with_an_error_line(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    gate: tuple[str, asyncio.Event, asyncio.Event],
) -> None:
    target, _, _ = gate
    url = await start_runner(write_spec(two_steps(target, "broken")))
    async with session.post(f"{url}/invoke?stream=1", json={"inputs": {"who": "ada"}}) as response:
        assert response.status == 200
        lines = await read_lines(response)
    assert [line["type"] for line in lines] == ["step", "step", "error"]
    failed = lines[1]["step"]
    assert failed["id"] == "call" and failed["attempts"] == 1
    assert failed["error"]["type"] == "bad_gateway" and "answered 500" in failed["error"]["message"]
    assert lines[2]["status"] == 502
    assert lines[2]["error"]["step"] == "call"
    assert lines[2]["error"]["message"] == failed["error"]["message"]


async def test_bad_inputs_are_a_plain_json_error_before_any_stream_starts(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    async with session.post(f"{url}/invoke?stream=true", json={"inputs": {}}) as response:
        assert response.status == 422
        assert response.content_type == "application/json"
        assert "Server-Timing" in response.headers
        body = await response.json()
    assert body["error"]["problems"][0]["path"] == "$.topic"
    async with session.post(f"{url}/invoke?stream=true", json={"topic": "x"}) as response:
        assert response.status == 400
        assert '{"inputs"' in (await response.json())["error"]["message"]


async def test_without_stream_the_answer_is_one_json_body_with_timing_and_cache_headers(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    async with session.post(
        f"{url}/invoke?stream=false", json={"inputs": {"topic": "raft"}}
    ) as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        assert response.headers["X-Plnt-Cache"] == "miss"
        assert "runner;dur=" in response.headers["Server-Timing"]
        body = await response.json()
    assert "type" not in body and [step["id"] for step in body["trace"]] == [
        "pros",
        "cons",
        "join",
    ]
    assert all("error" not in step for step in body["trace"])


async def test_streamed_invocations_count_in_the_invoke_metrics(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    async with session.post(f"{url}/invoke?stream=true", json={"inputs": {"question": "q"}}) as r:
        # The answer step is the output step: its reply streams as a delta before its line.
        assert [line["type"] for line in await read_lines(r)] == ["delta", "step", "result"]
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    assert 'plnt_runner_invocations_total{endpoint="invoke",outcome="ok"} 1.0' in text
    assert 'plnt_runner_time_to_first_token_seconds_count{endpoint="invoke"} 1.0' in text
    assert "plnt_runner_in_flight 0.0" in text
