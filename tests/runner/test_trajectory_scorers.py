"""Trajectory scorers in the quality gate: an agent's tool calls and turns, read from the
trace a runner answered, held to bounds (a tool called at least/at most N times, turns at
most N, no invalid calls); the answer's structured output is scored by the existing
`jsonSchema` and JSON Pointer (`path` + `equals`) scorers. The gate asks the runner as it
does in a deploy (`plnt.sagas.gating.evaluating.answer`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pydantic
import pytest

from plnt.api import evaluations as ev
from plnt.sagas.gating import evaluating, scoring
from tests.support.agents import AGENT, calculator, chat_answer, scripted_backend
from tests.support.runners import StartRunner, openai_backend


def scorer(**fields: Any) -> ev.Scorer:
    return ev.Scorer.model_validate(fields)


async def test_the_gate_reads_tool_calls_and_turns_from_the_trace_and_holds_them_to_bounds(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return chat_answer(None, [("add", {"a": 1, "b": 2}), ("add", {"a": "x", "b": 2})])
        return chat_answer(json.dumps({"sum": json.loads(results[0]["content"])["sum"]}))

    async with calculator() as tool, scripted_backend(script) as llm:
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        answer, output = await evaluating.answer(session, url, {"q": "1 + 2"})
    assert json.loads(output) == {"sum": 3}
    assert answer.trajectory == {
        "solve": ev.StepTrajectory(turns=2, tool_calls={"add": 2}, invalid_tool_calls=1)
    }
    scorers = [
        scorer(name="calls-add", trajectory={"tool": "add", "minCalls": 1, "maxCalls": 2}),
        scorer(name="two-turns", trajectory={"step": "solve", "maxTurns": 2}),
        scorer(name="one-turn", trajectory={"maxTurns": 1}),
        scorer(name="no-invalid", trajectory={"maxInvalidCalls": 0}),
        scorer(name="never-broken", trajectory={"tool": "broken", "maxCalls": 0}),
        scorer(name="sum", path="/sum", equals=3),
        scorer(name="shape", jsonSchema={"type": "object", "required": ["sum"]}),
    ]
    scores = {score.scorer: score for score in scoring.score(scorers, answer)}
    assert {name for name, score in scores.items() if score.passed} == {
        "calls-add",
        "two-turns",
        "never-broken",
        "sum",
        "shape",
    }
    assert scores["one-turn"].detail == "2 turns > max 1"
    assert scores["no-invalid"].detail == "1 invalid calls > max 0"


def test_a_tool_called_too_rarely_or_a_step_without_a_loop_fails_with_the_reason() -> None:
    answer = ev.Answer(output="x", trajectory={"solve": ev.StepTrajectory(turns=1, tool_calls={})})
    found = scoring.score(
        [
            scorer(name="must-add", trajectory={"tool": "add", "minCalls": 1}),
            scorer(name="other", trajectory={"step": "plan", "maxTurns": 3}),
        ],
        answer,
    )
    assert [(score.passed, score.detail) for score in found] == [
        (False, "0 calls of 'add' < min 1"),
        (False, "step 'plan' ran no tool loop"),
    ]
    untraced = scoring.score([scorer(trajectory={"maxTurns": 3})], ev.Answer(output="x"))
    assert untraced[0].detail == "no trace to read the trajectory from"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"trajectory": {"tool": "add"}}, "give at least one of minCalls"),
        ({"trajectory": {"minCalls": 3, "maxCalls": 1}}, "minCalls is larger than maxCalls"),
        ({"trajectory": {"maxTurns": 2}, "path": "/a"}, "a trajectory is read from the trace"),
        ({"trajectory": {"maxTurns": 0}}, "greater than or equal to 1"),
    ],
)
def test_a_trajectory_scorer_without_sense_is_refused_naming_why(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        scorer(**fields)
    assert message in str(caught.value)
