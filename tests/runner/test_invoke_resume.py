"""Resuming an invocation on a runner: `stepOutputs` and `completedSteps` in the envelope.

A durable invocation asks each finished step's output on its step line, and on a retry
hands those outputs back: the runner seeds its DAG with them, runs only the rest, and
marks the seeded steps `resumed` in the trace. Counted with the step histogram of the
runner's /metrics, which only steps that ran observe.
"""

from __future__ import annotations

import aiohttp

from plnt.runner import settings
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner, read_lines

FANOUT = EXAMPLES / "fanout.workflow.yaml"
ECHO = settings.BackendConfig(type="echo", latency_ms=1)


async def step_runs(session: aiohttp.ClientSession, url: str, step: str) -> int:
    """How many times `step` ran on this runner (its step-latency observations)."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("plnt_runner_step_seconds_count{") and f'step="{step}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


async def test_step_lines_carry_each_finished_steps_output_when_asked(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(FANOUT, backend=ECHO)
    body = {"inputs": {"topic": "etcd"}, "stepOutputs": True}
    async with session.post(f"{url}/invoke", params={"stream": "true"}, json=body) as response:
        lines = await read_lines(response)
    steps = {line["step"]["id"]: line["output"] for line in lines if line["type"] == "step"}
    result = lines[-1]
    assert steps["pros"] == result["output"]["pros"]
    assert steps["join"] == result["output"]
    async with session.post(
        f"{url}/invoke", params={"stream": "true"}, json={"inputs": {"topic": "etcd"}}
    ) as response:
        plain = await read_lines(response)
    assert all("output" not in line for line in plain if line["type"] == "step")


async def test_completed_steps_are_not_run_again_and_are_marked_resumed(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(FANOUT, backend=ECHO)
    body = {
        "inputs": {"topic": "etcd"},
        "stepOutputs": True,
        "completedSteps": {"pros": {"output": "from an earlier attempt"}},
    }
    async with session.post(f"{url}/invoke", params={"stream": "true"}, json=body) as response:
        lines = await read_lines(response)
    ran = [line["step"]["id"] for line in lines if line["type"] == "step"]
    assert sorted(ran) == ["cons", "join"]
    result = lines[-1]
    assert result["output"]["pros"] == "from an earlier attempt"
    trace = {entry["id"]: entry for entry in result["trace"]}
    assert trace["pros"]["resumed"] is True and trace["pros"]["attempts"] == 0
    assert "resumed" not in trace["cons"]
    assert await step_runs(session, url, "pros") == 0
    assert await step_runs(session, url, "cons") == 1

    async with session.post(f"{url}/invoke", json=body) as response:  # not streamed: the same
        assert response.status == 200
        answer = await response.json()
    assert answer["output"]["pros"] == "from an earlier attempt"
    assert await step_runs(session, url, "pros") == 0


async def test_completed_steps_naming_an_unknown_step_are_refused_before_anything_runs(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(FANOUT, backend=ECHO)
    body = {"inputs": {"topic": "etcd"}, "completedSteps": {"nope": {"output": 1}}}
    async with session.post(f"{url}/invoke", params={"stream": "true"}, json=body) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert "completedSteps names steps the workflow does not have: nope" in error["message"]
    assert await step_runs(session, url, "pros") == 0
