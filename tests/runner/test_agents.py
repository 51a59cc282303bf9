"""Structured output and the tool loop, against a scripted backend (`tests/runner/scripted.py`)
and a calculator served over HTTP: what the runner sends (schemas, grammars, tools, the
results fed back), what it makes of the answers, and what the trace says. The same on the
real model: `tests/model/test_agents_on_the_model.py`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.agents import AGENT, calculator, chat_answer, scripted_backend
from tests.support.runners import StartRunner, invoke, openai_backend

CLASSIFY = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: classify}
inputs: {type: object, properties: {text: {type: string}}, required: [text]}
steps:
  - id: label
    kind: model
    MODE
    prompt: "Classify: {{ inputs.text }}"
    maxTokens: 20
    responseFormat:
      name: label
      jsonSchema:
        type: object
        properties: {category: {enum: [billing, technical]}, urgent: {type: boolean}}
        required: [category]
output: steps.label.output
"""


async def test_a_chat_step_with_a_response_format_sends_the_schema_and_outputs_the_parsed_json(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        return chat_answer('{"category": "billing", "urgent": true}')

    async with scripted_backend(script) as llm:
        url = await start_runner(
            write_spec(CLASSIFY.replace("MODE", "")), backend=openai_backend(llm.url)
        )
        status, body = await invoke(session, url, {"text": "charged twice"})
    assert status == 200, body
    assert body["output"] == {"category": "billing", "urgent": True}
    form = llm.requests[0]["response_format"]
    assert form["type"] == "json_schema" and form["json_schema"]["name"] == "label"
    assert form["json_schema"]["schema"]["required"] == ["category"]


async def test_an_answer_breaking_the_schema_fails_the_step_naming_the_json_path(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        return chat_answer('{"category": "sales", "urgent": "yes"}')

    async with scripted_backend(script) as llm:
        url = await start_runner(
            write_spec(CLASSIFY.replace("MODE", "")), backend=openai_backend(llm.url)
        )
        status, body = await invoke(session, url, {"text": "x"})
    assert status == 502, body
    message = body["error"]["message"]
    assert "step 'label'" in message
    assert "$.category: 'sales' is not one of" in message
    assert "$.urgent: 'yes' is not of type 'boolean'" in message


async def test_an_answer_that_is_not_json_is_an_invalid_output_and_can_be_retried(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    answers = iter(["Sure! It is billing.", '{"category": "technical"}'])
    spec = CLASSIFY.replace("MODE", "retry: {attempts: 2, backoffSeconds: 0, retryOn: [output]}")

    async with scripted_backend(lambda kind, body: chat_answer(next(answers))) as llm:
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"text": "x"})
    assert status == 200, body
    assert body["output"] == {"category": "technical"}
    assert body["trace"][0]["attempts"] == 2


async def test_a_completion_step_with_a_response_format_sends_a_grammar_of_the_schema(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    spec = CLASSIFY.replace("MODE", "mode: completion")
    async with scripted_backend(lambda kind, body: '{"category": "technical"}') as llm:
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"text": "x"})
    assert status == 200, body
    assert body["output"] == {"category": "technical"}
    grammar = llm.requests[0]["grammar"]
    assert grammar.startswith("root ::= ")
    assert '"\\"billing\\"" | "\\"technical\\""' in grammar
    assert "response_format" not in llm.requests[0]


async def test_a_chat_agent_calls_the_tool_feeds_the_result_back_and_answers(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return chat_answer(None, [("add", {"a": 2, "b": 40})])
        return chat_answer(f"The sum is {json.loads(results[0]['content'])['sum']}.")

    async with calculator() as tool, scripted_backend(script) as llm:
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"q": "2 + 40?"})
    assert status == 200, body
    assert body["output"] == "The sum is 42."
    assert tool.calls == [{"a": 2, "b": 40}]
    first, second = llm.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "broken"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "add"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": '{"sum": 42}',
    }
    step = body["trace"][0]
    assert [turn["final"] for turn in step["turns"]] == [False, True]
    assert step["toolCalls"] == 1 and step["invalidToolCalls"] == 0
    call = step["turns"][0]["toolCalls"][0]
    assert call["name"] == "add" and call["ok"] is True and call["durationMs"] >= 0
    assert call["arguments"] == '{"a": 2, "b": 40}'
    assert step["turns"][0]["usage"]["completion_tokens"] == 5
    assert body["usage"]["prompt_tokens"] == 20 and body["usage"]["completion_tokens"] == 10


async def test_invalid_calls_go_back_to_the_model_as_errors_and_are_counted(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 1:
            return chat_answer(
                None,
                [("add", {"a": "two", "b": 1}), ("nope", {}), ("add", "{not json"), ("broken", {})],
            )
        return chat_answer("gave up")

    async with calculator() as tool, scripted_backend(script) as llm:
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"q": "?"})
    assert status == 200, body
    results = [json.loads(m["content"]) for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "$.a: 'two' is not of type 'integer'" in results[0]["error"]
    assert "unknown tool 'nope'" in results[1]["error"]
    assert "arguments are not JSON" in results[2]["error"]
    assert "broken" in results[3]["error"] and "500" in results[3]["error"]
    assert tool.calls == [{}]  # only the valid call to `broken` reached a tool
    step = body["trace"][0]
    assert step["toolCalls"] == 4 and step["invalidToolCalls"] == 3
    calls = step["turns"][0]["toolCalls"]
    assert [call.get("invalid", False) for call in calls] == [True, True, True, False]
    assert [call["arguments"] for call in calls][1:3] == ["{}", "{not json"]
    assert calls[3]["ok"] is False


async def test_the_calls_of_one_turn_run_at_once_up_to_the_bound(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 1:
            return chat_answer(None, [("add", {"a": n, "b": n}) for n in range(5)])
        sums = [json.loads(m["content"])["sum"] for m in body["messages"] if m["role"] == "tool"]
        return chat_answer(json.dumps(sums))

    async with calculator(overlap=2, calls=5) as tool, scripted_backend(script) as llm:
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"q": "?"})
    assert status == 200, body
    assert json.loads(body["output"]) == [0, 2, 4, 6, 8]  # results in the calls' order
    assert tool.peak == 2  # maxParallelToolCalls: 2, and they did overlap


async def test_a_loop_without_a_final_answer_fails_naming_the_turns_taken(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    async with (
        calculator() as tool,
        scripted_backend(lambda kind, body: chat_answer(None, [("add", {"a": 1, "b": 1})])) as llm,
    ):
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"q": "?"})
    assert status == 502, body
    assert body["error"]["type"] == "max_turns_exhausted"
    assert "no final answer after 3 turn(s)" in body["error"]["message"]
    assert len(llm.requests) == 3 and len(tool.calls) == 3


async def test_a_completion_agent_is_held_by_a_grammar_and_reads_results_from_its_transcript(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if "Result:" not in body["prompt"]:
            return '{"tool": "add", "arguments": {"a": 20, "b": 22}}'
        return '{"answer": "42"}'

    async with calculator() as tool, scripted_backend(script) as llm:
        spec = AGENT.replace("TOOL", tool.url).replace("MODE", "mode: completion")
        url = await start_runner(write_spec(spec), backend=openai_backend(llm.url))
        status, body = await invoke(session, url, {"q": "Q: 20 + 22\n"})
    assert status == 200, body
    assert body["output"] == "42"
    assert tool.calls == [{"a": 20, "b": 22}]
    first, second = llm.requests
    assert first["prompt"] == "Q: 20 + 22\n"
    assert second["prompt"] == (
        'Q: 20 + 22\n{"tool": "add", "arguments": {"a": 20, "b": 22}}\nResult: {"sum": 42}\n'
    )
    grammar = first["grammar"]
    assert '"{\\"tool\\": \\"add\\", \\"arguments\\": "' in grammar
    assert '"{\\"answer\\": "' in grammar
    assert [turn["final"] for turn in body["trace"][0]["turns"]] == [False, True]
