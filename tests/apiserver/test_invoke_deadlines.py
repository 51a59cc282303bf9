"""A call's deadline and a backend's refusals through the API server, against real runner
processes: the caller's timeout reaches the runner as the time left, the runner's 504 names
the hop that ran out, and a shed call's 503 keeps its `Retry-After`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.api_server import BASE, Api, workflowrun
from tests.support.examples import EXAMPLES
from tests.support.runners import runner_process
from tests.support.traffic import run_with_traffic, target
from tests.support.waiting import eventually

MERGE = {"Content-Type": "application/merge-patch+json"}


async def _runner(tmp_path: Path, **backend: object) -> AsyncIterator[str]:
    config = tmp_path / "backend.json"
    config.write_text(json.dumps({"type": "echo", "name": "echo", **backend}))
    async with runner_process(
        "--spec", str(EXAMPLES / "chat.workflow.yaml"), "--backend-config", str(config)
    ) as (_, url):
        yield url


@pytest.fixture
async def slow_runner(tmp_path: Path) -> AsyncIterator[str]:
    """A runner whose backend answers in 3 s, one call at a time, one call queued."""
    async for url in _runner(tmp_path, latencyMs=3000, maxConcurrency=1, maxQueue=1):
        yield url


async def test_a_callers_timeout_ends_the_call_with_a_504_naming_the_backend_call(
    api: Api, slow_runner: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, slow_runner))
    body = {"inputs": {"question": "late"}}
    reply = await api.call("POST", f"{BASE}/w/invoke?timeout=200ms", body=body)
    assert reply.status == 504, reply.text
    assert reply.json["error"]["hop"] == "the call to backend echo"
    reply = await api.call(
        "POST", f"{BASE}/w/invoke", body=body, headers={"X-Plnt-Timeout-Ms": "150"}
    )
    assert (reply.status, reply.json["error"]["type"]) == (504, "deadline_exceeded")


async def test_a_timeout_that_is_not_a_duration_is_a_400_naming_the_parameter(
    api: Api, slow_runner: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, slow_runner))
    body = {"inputs": {"question": "q"}}
    reply = await api.call("POST", f"{BASE}/w/invoke?timeout=soon", body=body)
    assert reply.status == 400 and "timeout" in reply.json["message"], reply.text
    reply = await api.call(
        "POST", f"{BASE}/w/invoke", body=body, headers={"X-Plnt-Criticality": "urgent"}
    )
    assert reply.status == 400 and "X-Plnt-Criticality" in reply.json["message"], reply.text


async def test_calls_beyond_the_backends_room_are_refused_with_retry_after_through_the_api(
    api: Api, slow_runner: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, slow_runner))
    replies = await asyncio.gather(
        *(
            api.call("POST", f"{BASE}/w/invoke?timeout=10s", body={"inputs": {"question": f"{i}"}})
            for i in range(6)
        )
    )
    statuses = sorted(reply.status for reply in replies)
    assert statuses.count(503) >= 3 and set(statuses) <= {200, 503}, statuses
    for reply in replies:
        if reply.status == 503:
            assert int(reply.headers["Retry-After"]) >= 1
            assert reply.json["error"]["backend"] == "echo"
            assert reply.json["error"]["queue"] == "admission queue"


async def test_the_runs_default_timeout_applies_when_the_caller_gives_none(
    api: Api, slow_runner: str
) -> None:
    run = workflowrun("d", calls={"timeoutSeconds": 0.2, "criticality": "critical"})
    assert (await api.call("POST", BASE, body=run)).status == 201
    traffic = {"status": {"revision": 1, "traffic": [target(1, 100, slow_runner)]}}
    patched = await api.call("PATCH", f"{BASE}/d/status", body=traffic, headers=MERGE)
    assert patched.status == 200, patched.text
    reply = await api.call("POST", f"{BASE}/d/invoke", body={"inputs": {"question": "q"}})
    assert reply.status == 504, reply.text
    assert reply.json["error"]["hop"] == "the call to backend echo"


async def test_call_defaults_that_are_not_valid_are_a_422_naming_the_field(api: Api) -> None:
    run = workflowrun("bad", calls={"timeoutSeconds": 0, "criticality": "urgent"})
    reply = await api.call("POST", BASE, body=run)
    assert reply.status == 422, reply.text
    fields = {cause["field"] for cause in reply.json["details"]["causes"]}
    assert {"spec.calls.timeoutSeconds", "spec.calls.criticality"} <= fields


async def test_a_caller_that_leaves_a_buffered_invoke_cancels_the_runners_call(
    api: Api, slow_runner: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, slow_runner))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.3):  # the caller gives up and closes its connection
            await api.call("POST", f"{BASE}/w/invoke", body={"inputs": {"question": "gone"}})

    async def cancelled() -> bool:
        async with api.session.get(f"{slow_runner}/metrics") as response:
            text = await response.text()
        return 'plnt_runner_invocations_total{endpoint="invoke",outcome="cancelled"} 1.0' in text

    await eventually(cancelled, within=10.0, what="the runner to count the call cancelled")
