"""The router, map-reduce and agent examples on the echo backend and the scripted stand-in:
structure and behaviour (which branch ran, the order of a map, the calls an agent made and
what it was shown). The same examples on the real model:
`tests/model/test_agents_on_the_model.py`."""

from __future__ import annotations

from typing import Any

import aiohttp

from plnt.workflowspec import documents, smoke
from tests.support.agents import calculator, scripted_backend
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner, invoked, openai_backend


async def test_the_router_runs_only_the_branch_of_the_category_it_classified(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if "grammar" in body:
            return '{"category": "technical"}'
        return " Please restart the app."

    spec = EXAMPLES / "router.workflow.yaml"
    async with scripted_backend(script) as llm:
        url = await start_runner(spec, backend=openai_backend(llm.url))
        body = await invoked(session, url, {"ticket": "It crashes."})
    assert body["output"] == {"category": "technical", "reply": " Please restart the app."}
    traces = {step["id"]: step for step in body["trace"]}
    assert traces["billing"]["skipped"].startswith("`when` is False")
    assert traces["other"]["skipped"].startswith("`when` is False")
    assert "skipped" not in traces["technical"]
    assert len(llm.requests) == 2  # the classification and the one branch that ran
    assert "category" in llm.requests[0]["grammar"]
    workflow = documents.load_workflow(spec)
    assert workflow.smoke is not None
    assert smoke.check(workflow.smoke.expect, body["output"]) == []


async def test_the_map_reduce_example_keeps_the_documents_order_on_the_echo_backend(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "mapreduce.workflow.yaml")
    documents_in = ["first text", "second text", "third text"]
    body = await invoked(session, url, {"documents": documents_in})
    output = body["output"]
    assert output["count"] == 3
    # The echo backend answers a completion with its prompt: each title names its document.
    assert [title.split("\n")[0] for title in output["titles"]] == [
        f"Text: {text}" for text in documents_in
    ]
    assert body["trace"][0]["items"] == 3


async def test_the_agent_example_calls_the_calculator_and_answers_from_its_result(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if body["prompt"].endswith("plus 9?\n"):
            return '{"tool": "add", "arguments": {"a": 3, "b": 9}}'
        return '{"answer": "12"}'

    async with calculator() as tool, scripted_backend(script) as llm:
        url = await start_runner(EXAMPLES / "agent.workflow.yaml", backend=openai_backend(llm.url))
        body = await invoked(session, url, {"a": 3, "b": 9, "calculator": tool.url})
    assert body["output"] == "12"
    assert tool.calls == [{"a": 3, "b": 9}]
    assert llm.requests[1]["prompt"].endswith('Result: {"sum": 12}\n')
    step = body["trace"][0]
    assert step["toolCalls"] == 1 and len(step["turns"]) == 2
