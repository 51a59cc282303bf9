"""The OpenAI-compatible endpoint, driven by the official `openai` SDK and by another runner."""

from __future__ import annotations

import json

import aiohttp
import openai

from plnt.runner import settings
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner


async def test_the_openai_sdk_gets_a_chat_completion_from_the_workflow(
    start_runner: StartRunner,
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused") as client:
        models = await client.models.list()
        assert [model.id for model in models.data] == ["chat"]
        completion = await client.chat.completions.create(
            model="chat",
            messages=[
                {"role": "system", "content": "ignored by the mapping"},
                {"role": "user", "content": "What is plnt?"},
            ],
        )
    assert completion.choices[0].message.content == "What is plnt?"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "chat"


async def test_the_openai_sdk_streams_the_output_as_server_sent_events(
    start_runner: StartRunner,
) -> None:
    url = await start_runner(EXAMPLES / "fanout.workflow.yaml")
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused") as client:
        stream = await client.chat.completions.create(
            model="fanout", messages=[{"role": "user", "content": "etcd"}], stream=True
        )
        pieces = []
        finish = None
        async for chunk in stream:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    assert len([piece for piece in pieces if piece]) > 1  # really sent in several chunks
    assert json.loads("".join(pieces))["pros"] == "List the strengths of etcd for engineers."
    assert finish == "stop"


async def test_raw_stream_ends_with_done(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    request = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with session.post(f"{url}/v1/chat/completions", json=request) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        text = await response.text()
    events = [line for line in text.split("\n\n") if line]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"


async def test_a_runner_can_use_another_runners_openai_endpoint_as_its_backend(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    first = await start_runner(
        EXAMPLES / "chat.workflow.yaml", backend=settings.BackendConfig(latency_ms=5)
    )
    backend = settings.BackendConfig(type="openai", endpoint=f"{first}/v1", model="chat")
    second = await start_runner(EXAMPLES / "fanout.workflow.yaml", backend=backend)
    async with session.post(f"{second}/invoke", json={"inputs": {"topic": "raft"}}) as response:
        assert response.status == 200
        body = await response.json()
    assert body["output"]["pros"] == "List the strengths of raft for engineers."
    assert body["trace"][0]["backendMs"] > 0
    async with session.get(f"{first}/metrics") as response:
        metrics = await response.text()
    # The two fan-out steps reached the first runner over HTTP as chat completions.
    assert 'plnt_runner_invocations_total{endpoint="chat",outcome="ok"} 2.0' in metrics


async def test_a_chat_request_without_a_user_message_is_a_400(
    start_runner: StartRunner, session: aiohttp.ClientSession
) -> None:
    url = await start_runner(EXAMPLES / "chat.workflow.yaml")
    request = {"model": "chat", "messages": [{"role": "system", "content": "x"}]}
    async with session.post(f"{url}/v1/chat/completions", json=request) as response:
        assert response.status == 400
        assert "no user message" in (await response.json())["error"]["message"]
