"""The runner's completion steps against the real model (Gemma 3 270M, a base model, on
llama-cpp-python's server): continuations at temperature 0, and usage reported by the
server on plain answers, counted by the runner on streams (that server sends none there).

Assertions are about structure and behaviour (a number the count continues with, token
counts equal to the server's own), never about exact prose.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai

from plnt.bench import continuations
from plnt.processes.modelserver import ModelServer
from plnt.runner import settings
from plnt.workflowspec import documents, smoke
from tests.support.examples import EXAMPLES
from tests.support.model import COUNTING, complete, tokenize_count
from tests.support.runners import StartRunner

TOKENS = 12
CONTINUE = continuations.spec_text(TOKENS, smoke=True)


def backend_of(server: ModelServer) -> settings.BackendConfig:
    return settings.BackendConfig(type="openai", endpoint=server.endpoint, model=server.model)


async def runner(start_runner: StartRunner, server: ModelServer, spec: Path) -> str:
    """A runner of `spec` on the model, without a step cache (every call reaches the model)."""
    return await start_runner(spec, backend=backend_of(server), cache_max_entries=0)


async def test_the_example_completes_the_count_at_temperature_0_and_passes_its_smoke_test(
    start_runner: StartRunner, session: aiohttp.ClientSession, model_server: ModelServer
) -> None:
    spec = EXAMPLES / "complete.workflow.yaml"
    workflow = documents.load_workflow(spec)
    assert workflow.smoke is not None
    url = await runner(start_runner, model_server, spec)
    async with session.post(f"{url}/invoke", json={"inputs": workflow.smoke.inputs}) as answer:
        assert answer.status == 200, await answer.text()
        body = await answer.json()
    assert isinstance(body["output"], str) and "5" in body["output"]
    assert "\n" not in body["output"]  # the transform kept the first line only
    assert smoke.check(workflow.smoke.expect, body["output"]) == []
    assert [step["id"] for step in body["trace"]] == ["continuation", "suggestion"]


async def test_a_plain_answer_carries_the_usage_the_server_reported(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    model_server: ModelServer,
    write_spec: Callable[[str], Path],
) -> None:
    url = await runner(start_runner, model_server, write_spec(CONTINUE))
    async with session.post(f"{url}/invoke", json={"inputs": {"prefix": COUNTING}}) as answer:
        body = await answer.json()
    direct = await asyncio.to_thread(complete, model_server, COUNTING, max_tokens=TOKENS, seed=0)
    assert body["output"] == direct["choices"][0]["text"]
    assert body["usage"] == {**direct["usage"], "source": "reported"}


async def stream_lines(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any]
) -> list[dict[str, Any]]:
    async with (
        asyncio.timeout(60),
        session.post(f"{url}/invoke?stream=true", json={"inputs": inputs}) as answer,
    ):
        assert answer.status == 200
        return [json.loads(line) async for line in answer.content if line.strip()]


async def test_a_streamed_completion_carries_usage_counted_as_the_server_counts(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    model_server: ModelServer,
    write_spec: Callable[[str], Path],
) -> None:
    url = await runner(start_runner, model_server, write_spec(CONTINUE))
    direct = await asyncio.to_thread(complete, model_server, COUNTING, max_tokens=TOKENS, seed=0)
    assert direct["choices"][0]["finish_reason"] == "length"  # TOKENS tokens were generated
    prompt_tokens = await asyncio.to_thread(tokenize_count, model_server, COUNTING)
    for _ in range(2):  # the first stream teaches the runner the server does not report
        lines = await stream_lines(session, url, {"prefix": COUNTING})
        deltas = [line["content"] for line in lines if line["type"] == "delta"]
        result = lines[-1]
        assert result["type"] == "result" and "".join(deltas) == result["output"]
        assert result["output"] == direct["choices"][0]["text"]
        assert result["usage"] == {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": TOKENS,
            "total_tokens": prompt_tokens + TOKENS,
            "source": "counted",
        }
        assert len(deltas) == TOKENS  # one token per delta, as this server sends them
    # Counted usage is what the server itself reports for the same request.
    counted = {key: result["usage"][key] for key in direct["usage"]}
    assert counted == direct["usage"]


async def test_the_openai_sdk_streams_a_text_completion_of_the_model_with_counted_usage(
    start_runner: StartRunner, model_server: ModelServer, write_spec: Callable[[str], Path]
) -> None:
    url = await runner(start_runner, model_server, write_spec(CONTINUE))
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused") as client:
        stream = await client.completions.create(
            model="continue",
            prompt=COUNTING,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
    assert "5" in text
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == TOKENS
    assert usage.model_extra == {"source": "counted"}


async def test_a_chat_through_the_sdk_streams_the_continuation_with_the_servers_token_counts(
    start_runner: StartRunner, model_server: ModelServer, write_spec: Callable[[str], Path]
) -> None:
    # The workflow is chatted with (the message is its prefix); its step asks the model
    # for a completion, so the stream is counted, and the counts are the server's own.
    url = await runner(start_runner, model_server, write_spec(CONTINUE))
    direct = await asyncio.to_thread(complete, model_server, COUNTING, max_tokens=TOKENS, seed=0)
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused") as client:
        stream = await client.chat.completions.create(
            model="continue",
            messages=[{"role": "user", "content": COUNTING}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) == TOKENS and "".join(pieces) == direct["choices"][0]["text"]
    usage = chunks[-1].usage
    assert usage is not None and usage.model_extra == {"source": "counted"}
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        direct["usage"]["prompt_tokens"],
        direct["usage"]["completion_tokens"],
    )


COLOURS = "red, green,"
"""A prefix after which Gemma 3 270M, left alone at temperature 0, samples its image marker
`<start_of_image>` within a few tokens (`… and blue<start_of_image>The red …`)."""
MARKER_TOKENS = 64


def special_texts() -> list[str]:
    """The texts of the served vocabulary's tokens that are not text (markers and control
    tokens), read from the weights themselves."""
    from plnt.processes.llamaserving import Vocabulary
    from plnt.processes.weights import assemble
    from tests.support.model import PIN

    vocabulary = Vocabulary(str(assemble(PIN)), markers=PIN.markers)
    return vocabulary.texts_of_suppressed()


async def test_no_special_token_of_the_vocabulary_reaches_a_caller_streamed_or_not(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    model_server: ModelServer,
    write_spec: Callable[[str], Path],
) -> None:
    specials = await asyncio.to_thread(special_texts)
    assert "<start_of_image>" in specials and "<start_of_turn>" in specials
    # Straight from the model server, even when the caller pushes the marker's logit up.
    plain = await asyncio.to_thread(
        complete, model_server, COLOURS, max_tokens=MARKER_TOKENS, seed=0
    )
    forced = await asyncio.to_thread(
        complete, model_server, COLOURS, max_tokens=8, seed=0, logit_bias={"255999": 100}
    )
    for answer in (plain, forced):
        text = answer["choices"][0]["text"]
        assert text.strip() and not [s for s in specials if s in text], text
    # Through a runner, streamed: every delta is text, and one token each, so the counted
    # usage equals what the server reports for the same request.
    spec = continuations.spec_text(MARKER_TOKENS)
    url = await runner(start_runner, model_server, write_spec(spec))
    lines = await stream_lines(session, url, {"prefix": COLOURS})
    deltas = [line["content"] for line in lines if line["type"] == "delta"]
    result = lines[-1]
    assert result["type"] == "result", result
    assert "".join(deltas) == result["output"]
    assert all(delta for delta in deltas) and not [s for s in specials if s in result["output"]]
    # The model generated MARKER_TOKENS tokens (it stops at the limit), each one a delta.
    assert plain["choices"][0]["finish_reason"] == "length"
    assert len(deltas) == MARKER_TOKENS == result["usage"]["completion_tokens"]
    assert result["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
