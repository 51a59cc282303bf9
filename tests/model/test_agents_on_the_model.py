"""The router, agent and map-reduce examples on the real model (Gemma 3 270M, a base model,
on llama-cpp-python's server), through a runner: with a grammar the model answers
schema-valid JSON at temperature 0, and calls tools with valid arguments.

A recording proxy sits between the runner and the model server, so a test sees what the
model was sent (the grammar, and the tool's result in the next turn's prompt). Assertions
are about structure and behaviour — the answer validates, one branch ran, a valid call was
made and its result reached the model, the loop ended within `maxTurns` — never prose.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import jsonschema
from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.processes.modelserver import ModelServer
from plnt.runner import settings
from plnt.workflowspec import documents, smoke
from tests.support.agents import calculator
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner, invoked


@contextlib.asynccontextmanager
async def recording(
    server: ModelServer, session: aiohttp.ClientSession
) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A proxy to the model server's `/v1/completions` keeping each request body."""
    seen: list[dict[str, Any]] = []

    async def forward(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        async with session.post(f"{server.endpoint}/completions", json=body) as answer:
            return web.Response(
                body=await answer.read(), status=answer.status, content_type="application/json"
            )

    app = web.Application()
    app.router.add_post("/v1/completions", forward)
    proxy = TestServer(app, host="127.0.0.1")
    await proxy.start_server()
    try:
        yield str(proxy.make_url("/v1")), seen
    finally:
        await proxy.close()


def backend(endpoint: str, server: ModelServer) -> settings.BackendConfig:
    return settings.BackendConfig(type="openai", endpoint=endpoint, model=server.model)


async def test_the_router_classifies_into_the_enum_with_a_grammar_and_runs_that_branch_only(
    start_runner: StartRunner, session: aiohttp.ClientSession, model_server: ModelServer
) -> None:
    spec = EXAMPLES / "router.workflow.yaml"
    workflow = documents.load_workflow(spec)
    classify = workflow.step("classify")
    assert workflow.smoke is not None and classify.kind == "model"
    assert classify.response_format is not None
    async with recording(model_server, session) as (endpoint, seen):
        url = await start_runner(spec, backend=backend(endpoint, model_server), cache_max_entries=0)
        body = await invoked(session, url, workflow.smoke.inputs)
    # The classification itself is schema-valid JSON, on the first attempt.
    traces = {step["id"]: step for step in body["trace"]}
    assert traces["classify"]["attempts"] == 1
    assert seen[0]["grammar"].startswith("root ::= ") and seen[0]["temperature"] == 0
    category = body["output"]["category"]
    jsonschema.validate({"category": category}, classify.response_format.json_schema)
    assert smoke.check(workflow.smoke.expect, body["output"]) == []
    ran = [name for name in ("billing", "technical", "other") if "skipped" not in traces[name]]
    assert ran == [category]


async def test_the_agent_calls_the_calculator_with_valid_arguments_and_answers_from_the_result(
    start_runner: StartRunner, session: aiohttp.ClientSession, model_server: ModelServer
) -> None:
    spec = EXAMPLES / "agent.workflow.yaml"
    workflow = documents.load_workflow(spec)
    solve = workflow.step("solve")
    assert solve.kind == "model"
    async with (
        calculator() as tool,
        recording(model_server, session) as (endpoint, seen),
    ):
        url = await start_runner(spec, backend=backend(endpoint, model_server), cache_max_entries=0)
        body = await invoked(session, url, {"a": 1234, "b": 4321, "calculator": tool.url})
    step = body["trace"][0]
    # A valid call was made: the calculator received schema-valid arguments.
    assert tool.calls, "the model never called the tool"
    parameters = workflow.tool("add").parameters
    for call in tool.calls:
        jsonschema.validate(call, parameters)
    assert step["invalidToolCalls"] == 0
    # Its result reached the model: the next turn's prompt carries it on a Result line.
    first_sum = tool.calls[0]["a"] + tool.calls[0]["b"]
    assert f"Result: {json.dumps({'sum': first_sum})}\n" in seen[1]["prompt"]
    # The loop ended with a final answer within maxTurns, and usage summed over its turns.
    assert 2 <= len(step["turns"]) <= solve.max_turns
    assert step["turns"][-1]["final"] is True
    assert isinstance(body["output"], str)
    assert body["usage"]["completion_tokens"] == sum(
        turn["usage"]["completion_tokens"] for turn in step["turns"]
    )
    assert all("grammar" in request for request in seen)


async def test_the_map_reduce_example_titles_each_document_in_order(
    start_runner: StartRunner, session: aiohttp.ClientSession, model_server: ModelServer
) -> None:
    spec = EXAMPLES / "mapreduce.workflow.yaml"
    workflow = documents.load_workflow(spec)
    assert workflow.smoke is not None
    async with recording(model_server, session) as (endpoint, seen):
        url = await start_runner(spec, backend=backend(endpoint, model_server), cache_max_entries=0)
        body = await invoked(session, url, workflow.smoke.inputs)
    assert smoke.check(workflow.smoke.expect, body["output"]) == []
    assert body["trace"][0]["items"] == 2 and body["trace"][0]["failedItems"] == []
    documents_in = workflow.smoke.inputs["documents"]
    assert sorted(request["prompt"] for request in seen) == sorted(
        f"Text: {text}\nTitle of this text, in a few words:" for text in documents_in
    )
