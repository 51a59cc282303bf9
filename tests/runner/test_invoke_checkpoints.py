"""Progress inside a step, for durable invocations: `progress` lines out, `stepProgress` in.

A stream that asked for step outputs reports each `forEach` element that answered and each
change of a tool loop's state; handed back (`stepProgress`, folded by
`plnt.api.checkpoints.fold` as the invocation's activity folds them), those elements,
turns and tool calls are not done again, and a non-idempotent call that was sent and never
answered fails the step instead of being sent twice. A completed step that was skipped
stays skipped for its dependants. What ran is counted by the scripted model's requests and
the calculator's calls, never by time.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from plnt.api import checkpoints
from tests.support.agents import AGENT, Calculator, calculator, chat_answer, scripted_backend
from tests.support.runners import StartRunner, openai_backend, read_lines

MAP = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: sums}
inputs: {type: object, properties: {xs: {type: array, items: {type: integer}}}}
steps:
  - id: sums
    kind: http
    forEach: inputs.xs
    maxParallel: 2
    method: POST
    url: "TOOL/add"
    headers: {Content-Type: application/json}
    body: '{"a": {{ item }}, "b": 100}'
    response: json
output: steps.sums.output
"""

SKIPPING = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: skipping}
inputs: {type: object, properties: {go: {type: boolean}}}
steps:
  - id: maybe
    kind: transform
    when: inputs.go
    expression: "'ran'"
  - id: after
    kind: transform
    needs: [maybe]
    expression: "steps.maybe.skipped"
output: steps.after.output
"""


async def stream(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    async with session.post(
        f"{url}/invoke", params={"stream": "true"}, json={"stepOutputs": True, **body}
    ) as response:
        assert response.status == 200, await response.text()
        return await read_lines(response)


def folded(lines: list[dict[str, Any]]) -> dict[str, checkpoints.StepProgress]:
    progress: dict[str, checkpoints.StepProgress] = {}
    for line in lines:
        if line["type"] == checkpoints.PROGRESS:
            assert checkpoints.fold(progress, line) is not None, line
    return progress


async def resume_loop(
    session: aiohttp.ClientSession, url: str, state: checkpoints.LoopState
) -> list[dict[str, Any]]:
    """Ask the agent `2+3` again, handing back `state` as step `solve`'s tool loop."""
    handed = {"solve": {"loops": {checkpoints.PLAIN_SCOPE: state}}}
    return await stream(session, url, {"inputs": {"q": "2+3"}, checkpoints.STEP_PROGRESS: handed})


async def test_a_map_reports_each_element_and_a_resumed_map_runs_only_the_rest(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    async with calculator() as tool:
        url = await start_runner(write_spec(MAP.replace("TOOL", tool.url)))
        lines = await stream(session, url, {"inputs": {"xs": [1, 2, 3]}})
        assert lines[-1]["output"] == [{"sum": 101}, {"sum": 102}, {"sum": 103}]
        progress = folded(lines)
        assert progress["sums"]["items"] == {
            "0": {"sum": 101},
            "1": {"sum": 102},
            "2": {"sum": 103},
        }
        assert len(tool.calls) == 3

        handed = {"sums": {"items": {"0": {"sum": 101}, "2": {"sum": 103}}}}
        lines = await stream(
            session, url, {"inputs": {"xs": [1, 2, 3]}, checkpoints.STEP_PROGRESS: handed}
        )
    assert lines[-1]["output"] == [{"sum": 101}, {"sum": 102}, {"sum": 103}]
    assert [call["a"] for call in tool.calls[3:]] == [2]  # only the element not handed back
    assert folded(lines)["sums"]["items"] == {"1": {"sum": 102}}


async def test_a_resumed_skipped_step_stays_skipped_for_its_dependants(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    url = await start_runner(write_spec(SKIPPING))
    lines = await stream(session, url, {"inputs": {"go": False}})
    (maybe,) = [line for line in lines if line["type"] == "step" and line["step"]["id"] == "maybe"]
    assert maybe["output"] is None and maybe["step"]["skipped"]
    assert lines[-1]["output"] is True
    body = {
        "inputs": {"go": False},
        "completedSteps": {"maybe": {"output": None, "skipped": maybe["step"]["skipped"]}},
    }
    lines = await stream(session, url, body)
    assert lines[-1]["output"] is True
    trace = {entry["id"]: entry for entry in lines[-1]["trace"]}
    assert trace["maybe"]["resumed"] is True and trace["maybe"]["skipped"]


def two_turns(answers: list[str]) -> Callable[[str, dict[str, Any]], Any]:
    """Turn 1 asks for `add(2, 3)`, turn 2 answers; notes each request's kind."""

    def script(kind: str, body: dict[str, Any]) -> Any:
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        answers.append("answer" if tool_results else "call")
        if tool_results:
            return chat_answer("the sum is 5")
        return chat_answer(None, [("add", {"a": 2, "b": 3})])

    return script


@contextlib.asynccontextmanager
async def agent_runner(
    start_runner: StartRunner, write_spec: Callable[[str], Path], agent: str
) -> AsyncIterator[tuple[str, list[str], Calculator]]:
    """A runner of `agent` (`AGENT`'s text) on a two-turn scripted model and the calculator:
    its URL, the kinds of request the model was asked (`two_turns`) and the calculator."""
    asked: list[str] = []
    async with scripted_backend(two_turns(asked)) as llm, calculator() as tool:
        spec = write_spec(agent.replace("TOOL", tool.url).replace("MODE", ""))
        yield await start_runner(spec, backend=openai_backend(llm.url)), asked, tool


async def test_a_tool_loop_resumed_after_its_first_turn_does_not_ask_or_call_again(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    async with agent_runner(start_runner, write_spec, AGENT) as (url, asked, tool):
        lines = await stream(session, url, {"inputs": {"q": "2+3"}})
        assert lines[-1]["output"] == "the sum is 5"
        loops = folded(lines)["solve"]["loops"]
        state = loops[checkpoints.PLAIN_SCOPE]
        # the last state: one finished turn (the final turn ends the step, not the state)
        assert [turn["turn"] for turn in state["turns"]] == [1]
        assert "pending" not in state and state["messages"][-1]["role"] == "tool"
        assert (asked, len(tool.calls)) == (["call", "answer"], 1)

        lines = await resume_loop(session, url, state)
    assert lines[-1]["output"] == "the sum is 5"
    assert (asked[2:], len(tool.calls)) == (["answer"], 1)  # turn 1 neither asked nor called
    (step,) = lines[-1]["trace"]
    assert [turn.get("resumed", False) for turn in step["turns"]] == [True, False]
    assert step["toolCalls"] == 1


def pending_state(call_id: str, name: str, *, sent: bool) -> checkpoints.LoopState:
    """A loop whose first turn asked for one call, which has not answered."""
    arguments = '{"a": 2, "b": 3}'
    return {
        "turns": [],
        "messages": [
            {"role": "user", "content": "2+3"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            },
        ],
        "pending": {
            "calls": [{"id": call_id, "name": name, "arguments": arguments}],
            "text": "",
            "results": {},
            "sent": [call_id] if sent else [],
        },
    }


NOT_IDEMPOTENT = AGENT.replace("idempotent: true", "idempotent: false")


async def test_a_call_of_a_non_idempotent_tool_in_flight_fails_the_resumed_step(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    async with agent_runner(start_runner, write_spec, NOT_IDEMPOTENT) as (url, asked, tool):
        # The first run reports the call as sent before sending it.
        lines = await stream(session, url, {"inputs": {"q": "2+3"}})
        sent = [
            line["loop"]["pending"]["sent"]
            for line in lines
            if line["type"] == checkpoints.PROGRESS and "pending" in line["loop"]
        ]
        assert ["call_0"] in sent
        before = (len(asked), len(tool.calls))
        lines = await resume_loop(session, url, pending_state("call_0", "add", sent=True))
        assert (len(asked), len(tool.calls)) == before  # neither asked nor sent again
        error = lines[-1]
        assert error["type"] == "error" and error["error"]["step"] == "solve"
        assert "not idempotent" in error["error"]["message"]
        assert "call_0" in error["error"]["message"]

        # Asked for but never sent: it is sent now, once, and the loop goes on.
        lines = await resume_loop(session, url, pending_state("call_0", "add", sent=False))
    assert lines[-1]["output"] == "the sum is 5"
    assert len(tool.calls) == before[1] + 1 and asked[before[0] :] == ["answer"]


async def test_an_idempotent_call_in_flight_is_sent_again_and_an_answered_one_is_reused(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    async with agent_runner(start_runner, write_spec, AGENT) as (url, asked, tool):
        in_flight = pending_state("call_0", "add", sent=True)
        lines = await resume_loop(session, url, in_flight)
        assert lines[-1]["output"] == "the sum is 5" and len(tool.calls) == 1
        (step,) = lines[-1]["trace"]
        carried, last = step["turns"]
        # The turn under way was not asked again (its reply came with the state): resumed,
        # no model time here; its call was made here, so the call is not.
        assert carried.get("resumed") is True and carried["modelMs"] == 0.0
        assert "resumed" not in carried["toolCalls"][0] and "resumed" not in last
        assert "fallback" not in carried

        answered = pending_state("call_0", "add", sent=True)
        answered["pending"]["results"] = {"call_0": '{"sum": 5}'}
        answered["pending"]["fallback"] = "small"  # the fallback gave the earlier reply
        lines = await resume_loop(session, url, answered)
    assert lines[-1]["output"] == "the sum is 5"
    assert len(tool.calls) == 1  # the answered call was not sent again
    (step,) = lines[-1]["trace"]
    assert [turn.get("fallback") for turn in step["turns"]] == ["small", None]
    assert asked == ["answer", "answer"]
