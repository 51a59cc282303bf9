"""`when`, `forEach` (with `maxParallel` and `continueOnError`), `retry` and `timeoutSeconds`
on the echo backend and local HTTP targets: which steps run, what their dependants see,
the order of a map's results, how many run at once, and what the trace says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.runner import settings
from tests.support.runners import StartRunner, invoke

ROUTER = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: route}
inputs: {type: object, properties: {kind: {type: string}, text: {type: string}}}
steps:
  - id: billing
    kind: model
    when: inputs.kind == 'billing'
    prompt: "billing: {{ inputs.text }}"
  - id: other
    kind: model
    when: inputs.kind != 'billing'
    prompt: "other: {{ inputs.text }}"
  - id: pick
    kind: transform
    needs: [billing, other]
    expression: >-
      {"answer": steps.other.output if steps.billing.skipped else steps.billing.output,
       "skipped": [steps.billing.skipped, steps.other.skipped]}
output: steps.pick.output
"""

MAP = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: map}
inputs: {type: object, properties: {words: {type: array, items: {type: string}}}}
steps:
  - id: each
    kind: model
    forEach: inputs.words
    maxParallel: 4
    prompt: "{{ index }}:{{ item }}"
    cache: false
  - id: reduce
    kind: transform
    needs: [each]
    expression: steps.each.output | join(",")
output: steps.reduce.output
"""


@pytest.fixture
async def flaky() -> AsyncIterator[dict[str, Any]]:
    """`GET /n/{k}` answers 500 for the first k requests of a test, then 200 `{"ok": n}`;
    `GET /item/{x}` answers 500 when x is `bad`; `GET /slow` answers after 5 s."""
    state: dict[str, Any] = {"requests": 0, "url": "", "slow": {"asked": 0, "answered": 0}}

    async def counted(request: web.Request) -> web.Response:
        state["requests"] += 1
        if state["requests"] <= int(request.match_info["k"]):
            return web.json_response({"error": "not yet"}, status=500)
        return web.json_response({"ok": state["requests"]})

    async def item(request: web.Request) -> web.Response:
        if request.match_info["x"] == "bad":
            return web.json_response({"error": "bad"}, status=500)
        return web.json_response({"item": request.match_info["x"]})

    async def slow(request: web.Request) -> web.Response:
        state["slow"]["asked"] += 1
        await asyncio.sleep(5)  # outlives the step's timeout: the runner gives up first
        state["slow"]["answered"] += 1
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/n/{k}", counted)
    app.router.add_get("/item/{x}", item)
    app.router.add_get("/slow", slow)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    state["url"] = str(server.make_url("")).rstrip("/")
    try:
        yield state
    finally:
        await server.close()


async def test_a_false_when_skips_the_step_and_its_dependants_see_it_skipped(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    url = await start_runner(write_spec(ROUTER))
    status, body = await invoke(session, url, {"kind": "billing", "text": "refund"})
    assert status == 200, body
    assert body["output"] == {"answer": "billing: refund", "skipped": [False, True]}
    traces = {step["id"]: step for step in body["trace"]}
    assert traces["other"]["skipped"] == "`when` is False: inputs.kind != 'billing'"
    assert "skipped" not in traces["billing"] and "skipped" not in traces["pick"]
    status, body = await invoke(session, url, {"kind": "bug", "text": "crash"})
    assert body["output"] == {"answer": "other: crash", "skipped": [True, False]}


async def test_a_map_keeps_the_order_of_its_elements(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    echo = settings.BackendConfig(type="echo", latency_ms=20)
    url = await start_runner(write_spec(MAP), backend=echo)
    words = [f"w{n}" for n in range(8)]
    status, body = await invoke(session, url, {"words": words})
    assert status == 200, body
    assert body["output"] == ",".join(f"{n}:w{n}" for n in range(8))
    assert body["trace"][0]["items"] == 8 and body["trace"][0]["failedItems"] == []


@pytest.fixture
async def gate() -> AsyncIterator[dict[str, Any]]:
    """`GET /hold/{x}` holds each request until `maxParallel` (4) are in flight at once, or
    every element has arrived (the last wave may be short), and records the most in flight.
    A runner that ran fewer at once would leave requests held: they give up after 10 s and
    say so, so the test fails on what it saw, not on how long it took."""
    state: dict[str, Any] = {"url": "", "arrived": 0, "in_flight": 0, "most": 0, "gave_up": 0}
    changed = asyncio.Condition()
    total, width = 8, 4

    def full() -> bool:
        return state["in_flight"] >= width or state["arrived"] >= total

    async def hold(request: web.Request) -> web.Response:
        async with changed:
            state["arrived"] += 1
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
            changed.notify_all()
            try:
                await asyncio.wait_for(changed.wait_for(full), timeout=10)
            except TimeoutError:
                state["gave_up"] += 1
            state["in_flight"] -= 1
            changed.notify_all()
        return web.json_response({"item": request.match_info["x"]})

    app = web.Application()
    app.router.add_get("/hold/{x}", hold)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    state["url"] = str(server.make_url("")).rstrip("/")
    try:
        yield state
    finally:
        await server.close()


async def test_a_map_runs_max_parallel_elements_at_once_and_never_more(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    gate: dict[str, Any],
) -> None:
    spec = f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: held}}
inputs: {{type: object}}
steps:
  - id: fetch
    kind: http
    forEach: '["a", "b", "c", "d", "e", "f", "g", "h"]'
    maxParallel: 4
    url: "{gate["url"]}/hold/{{{{ item }}}}"
output: steps.fetch.output
"""
    url = await start_runner(write_spec(spec))
    status, body = await invoke(session, url, {})
    assert status == 200, body
    assert body["output"] == [{"item": x} for x in "abcdefgh"]
    assert gate["arrived"] == 8
    assert gate["most"] == 4  # 4 at once: not one at a time, not all 8
    assert gate["gave_up"] == 0  # every wave filled: the runner kept 4 in flight


async def test_one_failed_element_fails_the_map_unless_it_continues_on_error(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    flaky: dict[str, Any],
) -> None:
    spec = f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: fetch}}
inputs: {{type: object}}
steps:
  - id: fetch
    kind: http
    forEach: '["a", "bad", "c"]'
    CONTINUE
    url: "{flaky["url"]}/item/{{{{ item }}}}"
output: steps.fetch.output
"""
    url = await start_runner(write_spec(spec.replace("CONTINUE", "")))
    status, body = await invoke(session, url, {})
    assert status == 502, body
    assert "step 'fetch'" in body["error"]["message"]
    assert "(forEach element 1)" in body["error"]["message"]
    url = await start_runner(write_spec(spec.replace("CONTINUE", "continueOnError: true")))
    status, body = await invoke(session, url, {})
    assert status == 200, body
    assert body["output"] == [{"item": "a"}, None, {"item": "c"}]
    (failed,) = body["trace"][0]["failedItems"]
    assert failed["index"] == 1 and "answered 500" in failed["error"]


async def test_a_for_each_that_is_not_a_list_fails_the_step_saying_what_it_gave(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    untyped = MAP.replace("{words: {type: array, items: {type: string}}}", "{words: {}}")
    url = await start_runner(write_spec(untyped))
    status, body = await invoke(session, url, {"words": "abc"})
    assert status == 500, body
    assert "`forEach` gave str, not a list" in body["error"]["message"]


async def test_retry_tries_again_after_the_failures_it_names_with_the_attempts_it_allows(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    flaky: dict[str, Any],
) -> None:
    spec = f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: flaky}}
steps:
  - id: fetch
    kind: http
    url: "{flaky["url"]}/n/2"
    retry: RETRY
output: steps.fetch.output
"""
    policy = "{attempts: 3, backoffSeconds: 0.01, backoffFactor: 1}"
    url = await start_runner(write_spec(spec.replace("RETRY", policy)))
    status, body = await invoke(session, url, {})
    assert status == 200, body
    assert body["output"] == {"ok": 3} and body["trace"][0]["attempts"] == 3
    flaky["requests"] = 0
    not_backend = "{attempts: 3, backoffSeconds: 0, retryOn: [timeout]}"
    url = await start_runner(write_spec(spec.replace("RETRY", not_backend)))
    status, body = await invoke(session, url, {})
    assert status == 502, body
    assert flaky["requests"] == 1  # a backend failure is not in retryOn: one attempt


async def test_each_attempt_is_bounded_by_timeout_seconds(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    flaky: dict[str, Any],
) -> None:
    spec = f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: slow}}
steps:
  - id: fetch
    kind: http
    url: "{flaky["url"]}/slow"
    timeoutSeconds: 0.2
    retry: {{attempts: 2, backoffSeconds: 0}}
output: steps.fetch.output
"""
    url = await start_runner(write_spec(spec))
    status, body = await invoke(session, url, {})
    assert status == 504, body
    assert "timed out after 0.2s (attempt 2)" in body["error"]["message"]
    assert flaky["slow"] == {"asked": 2, "answered": 0}  # both attempts given up, unanswered
