"""Completion steps (`mode: completion`) and usage a backend does not report, against the
OpenAI stand-in (`tests/support/llm.py`), which can stream without usage as
llama-cpp-python's server does. The same behaviour on the real model: `tests/model`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from plnt.runner import settings
from tests.support.examples import EXAMPLES
from tests.support.llm import LLM, serving_llm, tokens_of
from tests.support.runners import StartRunner, invoked

CONTINUE = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: continue}
inputs: {type: object, properties: {prefix: {type: string}}, required: [prefix]}
steps:
  - id: more
    kind: model
    mode: completion
    prompt: "{{ inputs.prefix }}"
    maxTokens: 8
    temperature: 0
    stop: ["\\n\\n"]
    seed: 7
output: steps.more.output
"""

CHAT_THEN_COMPLETE = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: mixed}
inputs: {type: object, properties: {topic: {type: string}}, required: [topic]}
steps:
  - id: ask
    kind: model
    prompt: "{{ inputs.topic }}"
  - id: more
    kind: model
    mode: completion
    needs: [ask]
    prompt: "{{ steps.ask.output }} and"
output: steps.more.output
"""

CHAT = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: talk}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
steps:
  - {id: answer, kind: model, prompt: "{{ inputs.q }}"}
output: steps.answer.output
"""


@pytest.fixture
async def llm() -> AsyncIterator[LLM]:
    async with serving_llm(None) as served:
        yield served


@pytest.fixture
def runner_on(start_runner: StartRunner, write_spec: Callable[[str], Path]) -> Callable[..., Any]:
    """`await runner_on(llm, SPEC_TEXT)`: a runner of the spec on the stand-in, no cache."""

    async def start(llm: LLM, spec: str) -> str:
        backend = settings.BackendConfig(type="openai", endpoint=llm.url, model="stand-in")
        return await start_runner(write_spec(spec), backend=backend, cache_max_entries=0)

    return start


async def invoke_stream(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any]
) -> list[dict[str, Any]]:
    async with (
        asyncio.timeout(20),
        session.post(f"{url}/invoke?stream=true", json={"inputs": inputs}) as response,
    ):
        assert response.status == 200
        return [json.loads(line) async for line in response.content if line.strip()]


async def test_a_completion_step_sends_its_prompt_and_options_to_the_completions_api(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    url = await runner_on(llm, CONTINUE)
    body = await invoked(session, url, {"prefix": "1, 2, 3,"})
    assert body["output"] == "stand-in: 1, 2, 3,"
    sent = llm.requests[-1]
    assert "messages" not in sent
    assert (sent["prompt"], sent["max_tokens"], sent["temperature"]) == ("1, 2, 3,", 8, 0)
    assert (sent["stop"], sent["seed"]) == (["\n\n"], 7)
    prompt, completion = len(tokens_of("1, 2, 3,")), len(tokens_of(body["output"]))
    assert body["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "source": "reported",
    }


async def test_a_stream_with_the_backends_usage_is_reported_and_nothing_is_counted(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    url = await runner_on(llm, CONTINUE)
    lines = await invoke_stream(session, url, {"prefix": "one two"})
    assert llm.requests[-1]["stream_options"] == {"include_usage": True}
    assert lines[-1]["usage"]["source"] == "reported"
    assert llm.tokenized == []


async def test_a_stream_without_usage_is_counted_from_its_deltas_and_the_servers_tokenizer(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    llm.stream_usage = False
    url = await runner_on(llm, CONTINUE)
    lines = await invoke_stream(session, url, {"prefix": "one two three"})
    deltas = [line for line in lines if line["type"] == "delta"]
    usage = lines[-1]["usage"]
    assert usage["source"] == "counted"
    assert usage["completion_tokens"] == len(deltas) == len(tokens_of("stand-in: one two three"))
    assert usage["prompt_tokens"] == len(tokens_of("one two three"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert llm.tokenized == [{"input": "one two three", "model": "stand-in"}]


async def test_the_prompt_is_counted_only_once_the_stream_has_ended_never_while_it_is_read(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    llm.stream_usage = False
    url = await runner_on(llm, CONTINUE)
    await invoke_stream(session, url, {"prefix": "first"})
    llm.hold_last = asyncio.Event()
    async with session.post(
        f"{url}/invoke?stream=true", json={"inputs": {"prefix": "second call"}}
    ) as response:
        first = json.loads(await response.content.readline())
        assert first["type"] == "delta"
        # Mid-stream: nothing else was sent to the one-at-a-time server.
        assert [body["input"] for body in llm.tokenized] == ["first"]
        llm.hold_last.set()
        lines = [first] + [json.loads(line) async for line in response.content if line.strip()]
    assert lines[-1]["usage"]["source"] == "counted"
    assert [body["input"] for body in llm.tokenized] == ["first", "second call"]


async def test_streams_from_a_server_that_interrupts_on_any_new_request_arrive_whole(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    # llama-cpp-python's server ends a stream as soon as another request waits for its
    # model; the runner's own prompt count must never be that request.
    llm.stream_usage, llm.interrupting = False, True
    url = await runner_on(llm, CONTINUE)
    expected = tokens_of("stand-in: one two three four five")
    for _ in range(12):
        lines = await invoke_stream(session, url, {"prefix": "one two three four five"})
        deltas = [line["content"] for line in lines if line["type"] == "delta"]
        assert deltas == expected
        assert lines[-1]["type"] == "result"
        assert lines[-1]["usage"]["completion_tokens"] == len(expected)
    assert llm.interrupted == 0


@pytest.mark.parametrize("cut_after", [0, 1, 3])
async def test_a_stream_the_backend_cuts_short_ends_in_an_error_line_not_a_shorter_answer(
    llm: LLM,
    runner_on: Callable[..., Any],
    session: aiohttp.ClientSession,
    cut_after: int,
) -> None:
    llm.cut_after = cut_after
    url = await runner_on(llm, CONTINUE)
    lines = await invoke_stream(session, url, {"prefix": "one two three four five"})
    assert [line["type"] for line in lines].count("delta") == cut_after
    last = lines[-1]
    assert last["type"] == "error", last
    assert "no finish_reason" in last["error"]["message"]
    assert "cut off" in last["error"]["message"]


async def test_a_cut_stream_through_the_openai_sdk_raises_instead_of_ending_quietly(
    llm: LLM, runner_on: Callable[..., Any]
) -> None:
    llm.cut_after = 2
    url = await runner_on(llm, CONTINUE)
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    pieces: list[str] = []
    with pytest.raises(openai.APIError, match="cut off"):
        stream = await client.completions.create(
            model="continue", prompt="one two three four", stream=True
        )
        async for chunk in stream:
            pieces.append(chunk.choices[0].text if chunk.choices else "")
    await client.close()
    assert "".join(pieces) == "".join(tokens_of("stand-in: one two three four")[:2])


async def test_without_a_tokenizer_endpoint_usage_is_absent_and_it_is_not_asked_again(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    llm.stream_usage, llm.tokenizer = False, False
    url = await runner_on(llm, CONTINUE)
    for prefix in ("a", "b", "c"):
        lines = await invoke_stream(session, url, {"prefix": prefix})
        assert lines[-1]["type"] == "result" and "usage" not in lines[-1]
    assert len(llm.tokenized) == 1  # the 404 is remembered


async def test_a_chat_stream_without_usage_has_none_since_its_prompt_cannot_be_counted(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    llm.stream_usage = False
    url = await runner_on(llm, CHAT)
    lines = await invoke_stream(session, url, {"q": "hello there"})
    assert lines[-1]["type"] == "result" and "usage" not in lines[-1]
    assert llm.tokenized == []


async def test_usage_summed_over_a_reported_call_and_a_counted_one_is_counted(
    llm: LLM, runner_on: Callable[..., Any], session: aiohttp.ClientSession
) -> None:
    llm.stream_usage = False
    url = await runner_on(llm, CHAT_THEN_COMPLETE)
    lines = await invoke_stream(session, url, {"topic": "raft"})
    usage = lines[-1]["usage"]
    # `ask` (not streamed: its answer reports usage) feeds `more` (streamed: counted).
    asked = "stand-in: raft"
    assert usage["source"] == "counted"
    assert usage["prompt_tokens"] == len(tokens_of("raft")) + len(tokens_of(f"{asked} and"))
    assert usage["completion_tokens"] == len(tokens_of(asked)) + len(
        tokens_of(f"stand-in: {asked} and")
    )


async def test_the_echo_backend_answers_a_completion_with_its_prompt(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    url = await start_runner(write_spec(CONTINUE))
    body = await invoked(session, url, {"prefix": "to be or not"})
    assert body["output"] == "to be or not" and "usage" not in body
    lines = await invoke_stream(session, url, {"prefix": "to be or not to be"})
    assert [line["content"] for line in lines if line["type"] == "delta"] == tokens_of(
        "to be or not to be"
    )


async def test_the_openai_sdk_gets_text_completions_from_the_workflow_plain_and_streamed(
    llm: LLM, runner_on: Callable[..., Any]
) -> None:
    llm.stream_usage = False
    url = await runner_on(llm, CONTINUE)
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused") as client:
        answer = await client.completions.create(model="continue", prompt="1, 2,")
        assert answer.object == "text_completion"
        assert answer.choices[0].text == "stand-in: 1, 2,"
        assert answer.choices[0].finish_reason == "stop"
        assert answer.usage is not None and answer.usage.model_extra == {"source": "reported"}
        stream = await client.completions.create(
            model="continue",
            prompt="3, 4,",
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices]
    assert "".join(texts) == "stand-in: 3, 4,"
    assert len([text for text in texts if text]) == len(tokens_of("stand-in: 3, 4,"))
    usage = chunks[-1].usage
    assert not chunks[-1].choices and usage is not None
    assert usage.completion_tokens == len(tokens_of("stand-in: 3, 4,"))
    assert usage.model_extra == {"source": "counted"}


async def test_a_completion_request_for_another_model_or_several_prompts_is_refused(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "complete.workflow.yaml")
    request = {"model": "other", "prompt": "x"}
    async with session.post(f"{url}/v1/completions", json=request) as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "model_not_found"
    request = {"model": "complete", "prompt": ["x", "y"]}
    async with session.post(f"{url}/v1/completions", json=request) as response:
        assert response.status == 400
    request = {"model": "complete"}
    async with session.post(f"{url}/v1/completions", json=request) as response:
        assert response.status == 400
    async with session.get(f"{url}/metrics") as response:
        metrics = await response.text()
    assert 'plnt_runner_invocations_total{endpoint="completion",outcome="ok"} 0.0' in metrics
