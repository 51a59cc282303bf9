"""`POST …/invoke?stream=true` through the API server to real runner processes.

The runners are `python -m plnt.runner` child processes on the echo backend; HTTP steps
call a gate served by the test, so a test decides when a step may finish. The tests play
the saga's part by writing `status.traffic` through the status subresource.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plnt.apiserver.settings import ServingLimits
from tests.support.api_server import BASE, Api, serving
from tests.support.examples import EXAMPLES
from tests.support.gate import Gate, gated_workflow, serving_gate
from tests.support.runners import runner_process
from tests.support.traffic import run_with_traffic, target

DEADLINE_SECONDS = 20.0
NDJSON = "application/x-ndjson"


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    """An HTTP target: `/hold` answers once released, `/broken` answers 500."""
    async with serving_gate() as served:
        yield served


@pytest.fixture
async def fanout_runner() -> AsyncIterator[str]:
    """A runner process of the fanout example on the echo backend with some latency."""
    spec = str(EXAMPLES / "fanout.workflow.yaml")
    args = ("--spec", spec, "--backend-type", "echo", "--latency-ms", "20")
    async with runner_process(*args) as (_, url):
        yield url


def gated_spec(tmp_path: Path, url: str) -> str:
    path = tmp_path / "gated.workflow.yaml"
    path.write_text(gated_workflow(url))
    return str(path)


def lines_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def log_of(api: Api, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await api.call("GET", f"{BASE}/{name}/invocationlog")).json[
        "items"
    ]
    return items


async def test_step_lines_and_the_result_pass_through_in_order_with_the_revision(
    api: Api, fanout_runner: str
) -> None:
    await run_with_traffic(api, "w", target(4, 100, fanout_runner))
    reply = await api.call(
        "POST", f"{BASE}/w/invoke", body={"inputs": {"topic": "etcd"}}, params={"stream": "true"}
    )
    assert reply.status == 200, reply.text
    assert reply.headers["Content-Type"] == NDJSON
    assert reply.headers["X-Plnt-Revision"] == "4"
    # Only the API server's own time: the runner's timings are in the result line.
    assert reply.headers["Server-Timing"].startswith("apiserver;dur=")
    assert "runner;" not in reply.headers["Server-Timing"]
    lines = lines_of(reply.text)
    assert [line["type"] for line in lines] == ["step", "step", "step", "result"]
    assert {lines[0]["step"]["id"], lines[1]["step"]["id"]} == {"pros", "cons"}
    assert lines[2]["step"]["id"] == "join"
    assert lines[3]["output"]["topic"] == "etcd"
    entry = (await log_of(api, "w"))[-1]
    assert (entry["status"], entry["revision"], entry["cache"]) == (200, 4, "miss")
    assert entry["endpoint"] == fanout_runner and entry["durationMs"] >= 0
    by_accept = await api.call(
        "POST", f"{BASE}/w/invoke", body={"inputs": {"topic": "etcd"}}, headers={"Accept": NDJSON}
    )
    assert [line["type"] for line in lines_of(by_accept.text)][-1] == "result"
    assert (await log_of(api, "w"))[-1]["cache"] == "hit"


async def test_a_step_line_reaches_the_caller_while_a_later_step_still_runs(
    api: Api, tmp_path: Path, gate: tuple[str, asyncio.Event, asyncio.Event]
) -> None:
    url, arrived, release = gate
    spec = gated_spec(tmp_path, f"{url}/hold")
    async with runner_process("--spec", spec, "--backend-type", "echo") as (_, runner):
        await run_with_traffic(api, "g", target(1, 100, runner))
        async with api.session.post(
            f"{api.url}{BASE}/g/invoke?stream=true", json={"inputs": {"who": "ada"}}
        ) as response:
            assert response.status == 200
            async with asyncio.timeout(DEADLINE_SECONDS):
                first = json.loads(await response.content.readline())
                await arrived.wait()
            assert first["step"]["id"] == "greet"
            assert not release.is_set()  # the runner is still inside `call`
            assert (await log_of(api, "g")) == []  # logged when the stream ends
            release.set()
            async with asyncio.timeout(DEADLINE_SECONDS):
                rest = lines_of((await response.read()).decode())
    assert [line["type"] for line in rest] == ["step", "result"]
    assert rest[-1]["output"] == ["hello ada", {"opened": True}]
    assert (await log_of(api, "g"))[-1]["status"] == 200


async def test_a_failure_after_streaming_began_ends_with_the_runners_error_line_and_is_logged(
    api: Api, tmp_path: Path, gate: tuple[str, asyncio.Event, asyncio.Event]
) -> None:
    url, _, _ = gate
    spec = gated_spec(tmp_path, f"{url}/broken")
    async with runner_process("--spec", spec, "--backend-type", "echo") as (_, runner):
        await run_with_traffic(api, "b", target(2, 100, runner))
        reply = await api.call(
            "POST", f"{BASE}/b/invoke?stream=true", body={"inputs": {"who": "ada"}}
        )
    assert reply.status == 200
    lines = lines_of(reply.text)
    assert [line["type"] for line in lines] == ["step", "step", "error"]
    assert lines[1]["step"]["error"]["type"] == "bad_gateway"
    assert lines[2]["status"] == 502 and lines[2]["error"]["step"] == "call"
    entry = (await log_of(api, "b"))[-1]
    assert (entry["status"], entry["revision"], entry["cache"]) == (502, 2, "off")


async def test_invalid_inputs_answer_the_runners_json_error_instead_of_a_stream(
    api: Api, fanout_runner: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, fanout_runner))
    reply = await api.call("POST", f"{BASE}/w/invoke?stream=true", body={"inputs": {}})
    assert reply.status == 422
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.json["error"]["problems"][0]["path"] == "$.topic"
    assert "apiserver;dur=" in reply.headers["Server-Timing"]
    assert (await log_of(api, "w"))[-1]["status"] == 422


async def test_a_runner_dying_mid_stream_ends_the_stream_with_a_bad_gateway_line(
    api: Api, tmp_path: Path, gate: tuple[str, asyncio.Event, asyncio.Event]
) -> None:
    url, arrived, _ = gate
    spec = gated_spec(tmp_path, f"{url}/hold")
    async with runner_process("--spec", spec, "--backend-type", "echo") as (process, runner):
        await run_with_traffic(api, "d", target(1, 100, runner))
        async with api.session.post(
            f"{api.url}{BASE}/d/invoke?stream=true", json={"inputs": {"who": "ada"}}
        ) as response:
            async with asyncio.timeout(DEADLINE_SECONDS):
                first = json.loads(await response.content.readline())
                await arrived.wait()
                process.kill()
                await process.wait()
                rest = lines_of((await response.read()).decode())
    assert first["step"]["id"] == "greet"
    assert [line["type"] for line in rest] == ["error"]
    assert rest[0]["status"] == 502 and runner in rest[0]["error"]["message"]
    assert (await log_of(api, "d"))[-1]["status"] == 502


async def test_an_unreachable_runner_is_a_503_status_before_any_stream(
    api: Api,
    closed_endpoint: str,
) -> None:
    await run_with_traffic(api, "w", target(1, 100, closed_endpoint))
    reply = await api.call("POST", f"{BASE}/w/invoke?stream=true", body={"inputs": {"topic": "x"}})
    assert reply.status == 503
    assert reply.json["reason"] == "ServiceUnavailable"


async def test_a_runner_slower_than_the_invoke_timeout_is_kubes_504_timeout_status(
    etcd_endpoint: str, tmp_path: Path, gate: tuple[str, asyncio.Event, asyncio.Event]
) -> None:
    url, arrived, release = gate
    spec = gated_spec(tmp_path, f"{url}/hold")
    limits = ServingLimits(invoke_timeout_seconds=0.5)  # `--invoke-timeout 0.5`
    async with (
        serving(etcd_endpoint, tmp_path, limits=limits) as short_api,
        runner_process("--spec", spec, "--backend-type", "echo") as (_, runner),
    ):
        await run_with_traffic(short_api, "slow", target(1, 100, runner))
        reply = await short_api.call("POST", f"{BASE}/slow/invoke", body={"inputs": {"who": "x"}})
        assert arrived.is_set()  # the runner was called and held at the gate past the limit
        release.set()
    assert reply.status == 504, reply.text
    status = json.loads(reply.text)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Timeout", 504)
