"""The OpenAI SDK against a run's `proxy` subresource, through the API server, end to end.

The stack: the API server (in process, real TLS, real etcd, bearer tokens from a token
file), real runner processes of the chat example, and behind them the streaming
OpenAI-compatible stand-in of `tests/support/llm.py`, which stands in for a GPU inference
server (none can run here). The tests play the saga's part by writing `status.traffic`.
The server shares this event loop, so the synchronous SDK client runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.api_server import BASE
from tests.support.llm import LLM, tokens_of
from tests.support.proxied import ALICE, BOB, CHAT_SPEC, ProxyStack, llm_runner, log_of
from tests.support.runners import runner_process
from tests.support.traffic import MERGE, run_with_traffic, target
from tests.support.waiting import eventually

DEADLINE_SECONDS = 20.0
REPO = Path(__file__).resolve().parents[2]
QUESTION = [{"role": "user", "content": "What is plnt?"}]


async def test_sync_and_async_sdk_clients_list_the_model_and_complete_with_backend_usage(
    proxy_stack: ProxyStack, llm: LLM
) -> None:
    async with llm_runner(llm) as (_, runner):
        await run_with_traffic(proxy_stack.api, "w", target(3, 100, runner))
        async with proxy_stack.client("w") as client:
            assert [m.id for m in (await client.models.list()).data] == ["chat"]
            raw = await client.chat.completions.with_raw_response.create(
                model="chat", messages=QUESTION
            )
        completion = raw.parse()

        def sync_call() -> Any:
            with proxy_stack.sync_client("w") as sync:
                question = [{"role": "user", "content": "Why plnt?"}]  # not from the cache
                return sync.chat.completions.create(model="chat", messages=question)

        sync_completion = await asyncio.to_thread(sync_call)
    # The backend's own counts: the system prompt is 5 tokens, the questions 3 and 2.
    for answer, content, used in (
        (completion, "stand-in: What is plnt?", (8, 4)),
        (sync_completion, "stand-in: Why plnt?", (7, 3)),
    ):
        assert answer.choices[0].message.content == content
        assert answer.usage is not None
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == used
        assert answer.usage.total_tokens == sum(used)
    assert raw.headers["X-Plnt-Revision"] == "3"
    timing = raw.headers["Server-Timing"]
    assert "runner;dur=" in timing and "backend;dur=" in timing and "apiserver;dur=" in timing
    assert ALICE not in " ".join(llm.seen)  # the caller's credentials stay at the API server
    entries = await log_of(proxy_stack.api, "w")  # the model listing is not an invocation
    assert [(e["path"], e["status"], e["revision"]) for e in entries] == [
        ("/v1/chat/completions", 200, 3),
        ("/v1/chat/completions", 200, 3),
    ]
    assert [entry["usage"] for entry in entries] == [
        {"promptTokens": 8, "completionTokens": 4, "source": "reported"},
        {"promptTokens": 7, "completionTokens": 3, "source": "reported"},
    ]


async def test_the_sdks_no_cache_header_passes_the_proxy_and_every_call_reaches_the_model(
    proxy_stack: ProxyStack, llm: LLM
) -> None:
    async with llm_runner(llm) as (_, runner):
        await run_with_traffic(proxy_stack.api, "w", target(1, 100, runner))
        async with proxy_stack.client("w") as client:
            for _ in range(2):
                await client.chat.completions.create(model="chat", messages=QUESTION)
            asked = len(llm.requests)
            outcomes = []
            for _ in range(3):
                raw = await client.chat.completions.with_raw_response.create(
                    model="chat", messages=QUESTION, extra_headers={"Cache-Control": "no-cache"}
                )
                outcomes.append(raw.headers["X-Plnt-Cache"])
    assert outcomes == ["bypass"] * 3
    assert len(llm.requests) == asked + 3  # each one generated, none came from the cache


async def test_tokens_stream_one_by_one_and_the_first_arrives_before_the_last_exists(
    proxy_stack: ProxyStack, llm: LLM
) -> None:
    llm.hold_last = asyncio.Event()
    question = [{"role": "user", "content": "tell me a story"}]
    async with llm_runner(llm) as (_, runner):
        await run_with_traffic(proxy_stack.api, "s", target(1, 100, runner))
        async with proxy_stack.client("s") as client:
            stream = await client.chat.completions.create(
                model="chat",
                messages=question,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = aiter(stream)
            async with asyncio.timeout(DEADLINE_SECONDS):
                first = await anext(chunks)
            first_at = time.perf_counter()
            assert first.choices[0].delta.content == "stand-in:"
            assert not llm.hold_last.is_set()  # the last token does not exist yet
            released_at = time.perf_counter()
            llm.hold_last.set()
            rest = [chunk async for chunk in chunks]
            last_at = time.perf_counter()
        pieces = [
            c.choices[0].delta.content for c in rest if c.choices and c.choices[0].delta.content
        ]
        assert [first.choices[0].delta.content, *pieces] == tokens_of("stand-in: tell me a story")
        assert first_at <= released_at <= last_at
        assert rest[-1].usage is not None and rest[-1].usage.completion_tokens == 5
        assert llm.requests[-1]["stream_options"] == {"include_usage": True}
        entry = (await log_of(proxy_stack.api, "s"))[-1]
        assert entry["status"] == 200 and 0 <= entry["timeToFirstTokenMs"] <= entry["durationMs"]

        # invoke?stream=true carries the same tokens as delta lines before the result.
        llm.hold_last = None
        reply = await proxy_stack.api.call(
            "POST", f"{BASE}/s/invoke?stream=true", body={"inputs": {"question": "hi there"}}
        )
    lines = [json.loads(line) for line in reply.text.splitlines() if line.strip()]
    deltas = [line["content"] for line in lines if line["type"] == "delta"]
    assert deltas == tokens_of("stand-in: hi there")
    assert lines[-1]["type"] == "result" and lines[-1]["usage"]["completion_tokens"] == 3
    assert "timeToFirstTokenMs" in (await log_of(proxy_stack.api, "s"))[-1]


CONTINUE = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: continue}
inputs: {type: object, properties: {prefix: {type: string}}, required: [prefix]}
steps:
  - {id: more, kind: model, mode: completion, prompt: "{{ inputs.prefix }}", temperature: 0}
output: steps.more.output
"""


async def test_text_completions_pass_the_proxy_and_the_log_says_whether_usage_was_counted(
    proxy_stack: ProxyStack, llm: LLM, tmp_path: Path
) -> None:
    llm.stream_usage = False  # as llama-cpp-python's server: no usage in streams
    spec = tmp_path / "continue.yaml"
    spec.write_text(CONTINUE)
    backend = ("--backend-type", "openai", "--endpoint", llm.url, "--model", "m")
    async with runner_process("--spec", str(spec), "--cache-max-entries", "0", *backend) as (
        _,
        runner,
    ):
        await run_with_traffic(proxy_stack.api, "c", target(1, 100, runner))
        async with proxy_stack.client("c") as client:
            plain = await client.completions.create(model="continue", prompt="1, 2, 3,")
            stream = await client.completions.create(
                model="continue",
                prompt="4, 5,",
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
        reply = await proxy_stack.api.call(
            "POST", f"{BASE}/c/invoke?stream=true", body={"inputs": {"prefix": "6, 7,"}}
        )
    assert plain.choices[0].text == "stand-in: 1, 2, 3,"
    assert plain.usage is not None and plain.usage.model_extra == {"source": "reported"}
    texts = [chunk.choices[0].text for chunk in chunks if chunk.choices]
    assert [text for text in texts if text] == tokens_of("stand-in: 4, 5,")
    counted = chunks[-1].usage
    assert counted is not None and counted.model_extra == {"source": "counted"}
    assert (counted.prompt_tokens, counted.completion_tokens) == (2, 3)
    result = [json.loads(line) for line in reply.text.splitlines() if line.strip()][-1]
    assert result["usage"]["source"] == "counted"
    entries = await log_of(proxy_stack.api, "c")
    assert [(entry.get("path"), entry["status"]) for entry in entries] == [
        ("/v1/completions", 200),
        ("/v1/completions", 200),
        (None, 200),  # the invoke subresource: no proxied path
    ]
    assert [entry["usage"] for entry in entries] == [
        {"promptTokens": 3, "completionTokens": 4, "source": "reported"},
        {"promptTokens": 2, "completionTokens": 3, "source": "counted"},
        {"promptTokens": 2, "completionTokens": 3, "source": "counted"},
    ]
    assert "timeToFirstTokenMs" in entries[1] and "timeToFirstTokenMs" in entries[2]


async def test_a_canary_split_routes_sdk_calls_by_weight(proxy_stack: ProxyStack) -> None:
    echo = ("--spec", CHAT_SPEC, "--backend-type", "echo")
    async with runner_process(*echo) as (_, stable), runner_process(*echo) as (_, canary):
        await run_with_traffic(proxy_stack.api, "c", target(1, 100, stable), target(2, 0, canary))

        async def revisions(calls: int) -> list[str]:
            seen = []
            async with proxy_stack.client("c") as client:
                for _ in range(calls):
                    raw = await client.chat.completions.with_raw_response.create(
                        model="chat", messages=QUESTION
                    )
                    seen.append(raw.headers["X-Plnt-Revision"])
            return seen

        assert set(await revisions(10)) == {"1"}  # weight 0 takes nothing
        split = {"status": {"traffic": [target(1, 50, stable), target(2, 50, canary)]}}
        assert (
            await proxy_stack.api.call("PATCH", f"{BASE}/c/status", body=split, headers=MERGE)
        ).status == 200
        assert set(await revisions(30)) == {"1", "2"}


async def test_refusals_come_in_openai_shape_as_the_sdks_exceptions(
    proxy_stack: ProxyStack, llm: LLM
) -> None:
    async with llm_runner(llm) as (_, runner):
        await run_with_traffic(proxy_stack.api, "r", target(1, 100, runner))
        async with proxy_stack.client("r", BOB) as client:
            with pytest.raises(openai.PermissionDeniedError) as denied:
                await client.chat.completions.create(model="chat", messages=QUESTION)
        async with proxy_stack.client("r", "not-a-token") as client:
            with pytest.raises(openai.AuthenticationError):
                await client.models.list()
        async with proxy_stack.client("r") as client:
            with pytest.raises(openai.NotFoundError) as unknown:
                await client.chat.completions.create(model="gpt-4o", messages=QUESTION)
        async with proxy_stack.client("missing") as client:
            with pytest.raises(openai.NotFoundError) as no_run:
                await client.models.list()
    assert denied.value.status_code == 403
    body = denied.value.body
    assert isinstance(body, dict) and body["type"] == "permission_error"
    assert 'cannot create resource "workflowruns/proxy"' in body["message"]
    assert body["code"] == "Forbidden" and body["param"] is None
    assert unknown.value.code == "model_not_found"
    assert "gpt-4o" in unknown.value.message
    assert no_run.value.code == "NotFound"
    assert llm.requests == []  # nothing refused reached the backend


async def test_a_client_that_disconnects_stops_the_backend_stream(
    proxy_stack: ProxyStack, llm: LLM
) -> None:
    llm.hold_last = asyncio.Event()
    async with llm_runner(llm) as (_, runner):
        await run_with_traffic(proxy_stack.api, "d", target(1, 100, runner))
        async with proxy_stack.client("d") as client:
            stream = await client.chat.completions.create(
                model="chat", messages=QUESTION, stream=True
            )
            async with asyncio.timeout(DEADLINE_SECONDS):
                await anext(aiter(stream))
                await stream.close()  # the caller goes away mid-answer
                await llm.cancelled_event.wait()  # ... and the backend sees its stream closed
        assert llm.cancelled == 1 and not llm.hold_last.is_set()
        entries = await eventually(
            lambda: log_of(proxy_stack.api, "d"), within=DEADLINE_SECONDS, what="the log entry"
        )
    assert entries[-1]["status"] == 499


async def test_plnt_token_create_adds_a_token_the_running_server_accepts_at_once(
    proxy_stack: ProxyStack,
) -> None:
    async with runner_process("--spec", CHAT_SPEC, "--backend-type", "echo") as (_, runner):
        await run_with_traffic(proxy_stack.api, "t", target(1, 100, runner))
        created = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "plnt", "token", "create", "carol", "--group", "plnt:invokers",
             "--token-file", str(proxy_stack.token_file)],
            capture_output=True, text=True, timeout=60, cwd=REPO,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip()
        async with proxy_stack.client("t", token) as client:
            completion = await client.chat.completions.create(model="chat", messages=QUESTION)
    assert completion.choices[0].message.content == "What is plnt?"
    assert completion.usage is None  # the echo backend reports no tokens: none are invented
    assert "carol,carol,plnt:invokers" in proxy_stack.token_file.read_text()
