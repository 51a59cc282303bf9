"""A runner under more load than its backend serves, over HTTP: deadlines end to end,
shedding with Retry-After, criticality, the retry budget, the breaker and the fallback.

Open-loop: calls are sent at a set rate whether or not earlier ones were answered, as
independent callers do. Assertions are about counts and statuses, never about durations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from plnt.api import breakers as api_breakers
from plnt.runner import settings
from tests.support.agents import AGENT, calculator, chat_answer, scripted_backend
from tests.support.runners import (
    Answer,
    StartRunner,
    budgeted_down_backend,
    counter_sum,
    failing_primary,
    invoke_answer,
    openai_backend,
)

SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: one}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
steps:
  - id: ask
    kind: model
    prompt: "{{ inputs.q }}"
    cache: false
    retries: RETRIES
output: steps.ask.output
"""


async def _open_loop(
    session: aiohttp.ClientSession,
    url: str,
    *,
    calls: int,
    interval: float,
    headers: Callable[[int], dict[str, str]],
) -> list[Answer]:
    """`calls` calls, one every `interval` seconds whatever the answers (open loop)."""
    tasks = []
    for index in range(calls):
        call = invoke_answer(session, url, {"q": f"q{index}"}, headers=headers(index))
        tasks.append(asyncio.create_task(call))
        await asyncio.sleep(interval)  # the arrival rate, not a wait for anything
    return await asyncio.gather(*tasks)


async def test_a_call_whose_time_is_up_is_answered_504_naming_the_runner(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "0")))
    status, body, _ = await invoke_answer(
        session, url, {"q": "hi"}, headers={"X-Plnt-Timeout-Ms": "0"}
    )
    assert status == 504
    assert body["error"]["type"] == "deadline_exceeded"
    assert body["error"]["hop"] == "the runner"
    assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == 0


async def test_a_deadline_shorter_than_the_backend_names_the_backend_call(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    backend = settings.BackendConfig(type="echo", latency_ms=5000, name="slow")
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "2")), backend=backend)
    status, body, _ = await invoke_answer(
        session, url, {"q": "hi"}, headers={"X-Plnt-Timeout-Ms": "200"}
    )
    assert status == 504
    assert body["error"]["hop"] == "the call to backend slow"
    assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == 1  # no retry


async def test_a_bad_timeout_or_criticality_header_is_a_400_naming_it(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "0")))
    status, body, _ = await invoke_answer(
        session, url, {"q": "hi"}, headers={"X-Plnt-Timeout-Ms": "soon"}
    )
    assert (status, "X-Plnt-Timeout-Ms" in body["error"]["message"]) == (400, True)
    status, body, _ = await invoke_answer(
        session, url, {"q": "hi"}, headers={"X-Plnt-Criticality": "urgent"}
    )
    assert (status, "X-Plnt-Criticality" in body["error"]["message"]) == (400, True)


async def test_at_four_times_capacity_calls_are_admitted_or_shed_at_once_and_service_recovers(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    # Capacity: one call at a time, 100 ms each (10/s); offered 40/s for one second.
    backend = settings.BackendConfig(
        type="echo", latency_ms=100, name="echo", max_concurrency=1, max_queue=3
    )
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "1")), backend=backend)
    answers = await _open_loop(
        session, url, calls=40, interval=0.025, headers=lambda _: {"X-Plnt-Timeout-Ms": "2000"}
    )
    statuses = [status for status, _, _ in answers]
    ok, shed = statuses.count(200), statuses.count(503)
    assert ok + shed == len(statuses), statuses  # no call waited past its deadline
    assert ok >= 5 and shed >= 10, statuses
    for status, body, headers in answers:
        if status == 503:
            assert int(headers["Retry-After"]) >= 1
            assert body["error"]["backend"] == "echo"
            assert body["error"]["queue"] == "admission queue"
    assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == ok  # no retries
    assert await counter_sum(session, url, "plnt_runner_shed_calls_total") == shed
    status, body, _ = await invoke_answer(
        session, url, {"q": "after"}, headers={"X-Plnt-Timeout-Ms": "2000"}
    )
    assert (status, body["output"]) == (200, "after")  # the load dropped: served again


async def test_under_overload_critical_calls_keep_their_goodput_and_sheddable_go_first(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    backend = settings.BackendConfig(
        type="echo", latency_ms=100, name="echo", max_concurrency=1, max_queue=4
    )
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "0")), backend=backend)
    kinds = ["critical", "sheddable", "sheddable", "sheddable"]  # 10/s critical of 40/s
    answers = await _open_loop(
        session,
        url,
        calls=40,
        interval=0.025,
        headers=lambda index: {
            "X-Plnt-Timeout-Ms": "3000",
            "X-Plnt-Criticality": kinds[index % len(kinds)],
        },
    )
    by_kind: dict[str, list[int]] = {"critical": [], "sheddable": []}
    for index, (status, _, _) in enumerate(answers):
        by_kind[kinds[index % len(kinds)]].append(status)
    critical_ok = by_kind["critical"].count(200) / len(by_kind["critical"])
    sheddable_ok = by_kind["sheddable"].count(200) / len(by_kind["sheddable"])
    assert critical_ok >= 0.8, by_kind
    assert sheddable_ok < critical_ok, by_kind


async def test_retries_stop_when_the_backends_retry_budget_is_spent(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    backend = budgeted_down_backend(closed_port)
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "5")), backend=backend)
    for _ in range(3):
        status, body, _ = await invoke_answer(session, url, {"q": "hi"})
        assert status == 502, body
    # Three calls of six attempts each would be 18 backend calls; the budget allows 2 retries.
    assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == 5
    assert (
        await counter_sum(
            session, url, 'plnt_runner_backend_retries_total{backend="down",outcome="refused"}'
        )
        == 3
    )


async def test_an_open_breaker_sends_calls_to_the_fallback_and_the_answer_says_so(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    backend = failing_primary(closed_port, breaker_failures=2)
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "0")), backend=backend)
    for _ in range(2):
        status, _, headers = await invoke_answer(session, url, {"q": "hi"})
        assert status == 502 and "X-Plnt-Fallback" not in headers
    status, body, headers = await invoke_answer(session, url, {"q": "hi"})
    assert status == 200
    assert body["output"] == "hi" and body["fallback"] == "small"
    assert headers["X-Plnt-Fallback"] == "small"
    assert await counter_sum(session, url, 'plnt_runner_breaker_state{backend="primary"}') == 2
    assert await counter_sum(session, url, "plnt_runner_fallback_calls_total") == 1
    primary_calls = 'plnt_runner_backend_calls_total{backend="primary"}'
    assert await counter_sum(session, url, primary_calls) == 2


async def test_a_runner_reports_its_breakers_with_when_and_why_they_moved(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    backend = failing_primary(closed_port, breaker_failures=2)
    url = await start_runner(write_spec(SPEC.replace("RETRIES", "0")), backend=backend)
    before = await _breakers(session, url)
    assert [(b.backend, b.state, b.reason) for b in before] == [
        ("primary", "closed", None),
        ("small", "closed", None),
    ]
    for _ in range(2):
        await invoke_answer(session, url, {"q": "hi"})
    primary, small = await _breakers(session, url)
    assert (primary.backend, primary.state) == ("primary", "open")
    assert primary.reason is not None and "2 consecutive failures" in primary.reason
    assert primary.since >= before[0].since and primary.since.endswith("Z")
    assert (small.backend, small.state) == ("small", "closed")


async def _breakers(session: aiohttp.ClientSession, url: str) -> list[api_breakers.BreakerState]:
    async with session.get(f"{url}{api_breakers.RUNNER_PATH}") as response:
        assert response.status == 200
        return api_breakers.RunnerBreakers.model_validate(await response.json()).breakers


async def test_an_answer_from_the_fallback_is_not_kept_in_the_step_cache(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    backend = failing_primary(closed_port, breaker_failures=1)
    cached = SPEC.replace("RETRIES", "0").replace("    cache: false\n", "")
    url = await start_runner(write_spec(cached), backend=backend)
    status, _, _ = await invoke_answer(session, url, {"q": "hi"})
    assert status == 502  # the failure that opens the breaker
    for _ in range(2):
        status, body, headers = await invoke_answer(session, url, {"q": "hi"})
        assert status == 200 and body["fallback"] == "small"
        assert headers["X-Plnt-Fallback"] == "small"
    assert await counter_sum(session, url, "plnt_runner_fallback_calls_total") == 2


CACHED_AGENT = (
    AGENT.replace("tools: [add, broken]", "tools: [add]")
    .replace("    cache: false\n", "    retries: 0\n")
    .replace("MODE", "")
)
"""A tool loop whose one tool is idempotent, cached, with no retries: one failure opens a
breaker of one failure at once."""


async def test_a_tool_loop_answered_by_the_fallback_says_so_in_turns_and_answer_and_is_not_cached(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    def script(kind: str, body: dict[str, Any]) -> Any:
        if any(message["role"] == "tool" for message in body["messages"]):
            return chat_answer("the sum is 5")
        return chat_answer(None, [("add", {"a": 2, "b": 3})])

    async with scripted_backend(script) as small, calculator() as tool:
        fallback = openai_backend(small.url, name="small")
        backend = failing_primary(closed_port, breaker_failures=1, fallback=fallback)
        url = await start_runner(
            write_spec(CACHED_AGENT.replace("TOOL", tool.url)), backend=backend
        )
        status, _, _ = await invoke_answer(session, url, {"q": "2+3"})
        assert status == 502  # the failure that opens the breaker
        for _ in range(2):
            status, body, headers = await invoke_answer(session, url, {"q": "2+3"})
            assert status == 200 and body["output"] == "the sum is 5"
            assert body["fallback"] == "small" and headers["X-Plnt-Fallback"] == "small"
            (step,) = body["trace"]
            assert [turn.get("fallback") for turn in step["turns"]] == ["small", "small"]
    # Both calls asked the fallback for both turns: the first answer was not kept.
    assert (len(small.requests), len(tool.calls)) == (4, 2)
    assert await counter_sum(session, url, "plnt_runner_fallback_calls_total") == 4
