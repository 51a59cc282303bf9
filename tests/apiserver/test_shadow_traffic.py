"""Shadow traffic through the API server, with real runner processes (echo backend).

The tests play the saga's part: they write `status.traffic` with the canary's entry
carrying `shadow: {percent, queueSize}` (weight 0, so every call goes to the stable).
Callers must only ever see the stable; the canary's answers appear as pairs under
`…/shadow` and as `"shadow": true` entries in the invocation log.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.support.api_server import BASE, Api
from tests.support.examples import EXAMPLES
from tests.support.gate import serving_gate
from tests.support.runners import runner_process
from tests.support.traffic import MERGE, run_with_traffic, shadowed, target

DEADLINE_SECONDS = 30.0


async def eventually(check: Callable[[], Awaitable[Any]], *, what: str) -> Any:
    """`check()`'s first truthy answer, polled until the deadline."""
    async with asyncio.timeout(DEADLINE_SECONDS):
        while True:
            found = await check()
            if found:
                return found
            await asyncio.sleep(0.05)  # polling a condition, with the deadline above
    raise AssertionError(what)  # pragma: no cover


async def pairs(api: Api, name: str, **params: str) -> dict[str, Any]:
    reply = await api.call("GET", f"{BASE}/{name}/shadow", params=params)
    assert reply.status == 200, reply.text
    answer: dict[str, Any] = reply.json
    return answer


async def log_of(api: Api, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (await api.call("GET", f"{BASE}/{name}/invocationlog")).json[
        "items"
    ]
    return items


async def test_callers_see_only_the_stable_while_the_canary_answers_in_the_shadow(
    api: Api, runner_a: str, runner_b: str
) -> None:
    await run_with_traffic(api, "s", target(1, 100, runner_a), shadowed(2, runner_b))
    for n in range(5):
        reply = await api.call("POST", f"{BASE}/s/invoke", body={"inputs": {"question": f"q{n}"}})
        assert reply.status == 200, reply.text
        assert reply.headers["X-Plnt-Revision"] == "1"
        assert reply.json["output"] == f"q{n}"
    streamed = await api.call(
        "POST",
        f"{BASE}/s/proxy/invoke",
        body={"inputs": {"question": "streamed"}},
        params={"stream": "true"},
    )
    assert streamed.status == 200 and streamed.headers["X-Plnt-Revision"] == "1"

    async def six() -> dict[str, Any] | None:
        found = await pairs(api, "s", revision="2")
        return found if len(found["items"]) == 6 else None

    answer = await eventually(six, what="six shadow pairs")
    assert answer["kind"] == "WorkflowRunShadowList" and answer["dropped"] == 0
    by_input = {p["inputs"]["question"]: p for p in answer["items"]}
    assert set(by_input) == {"q0", "q1", "q2", "q3", "q4", "streamed"}
    for question, pair in by_input.items():
        assert (pair["stable"]["revision"], pair["canary"]["revision"]) == (1, 2)
        assert pair["stable"]["output"] == pair["canary"]["output"] == question
        assert pair["canary"]["status"] == 200 and pair["id"]
    assert len({p["id"] for p in answer["items"]}) == 6
    log = await log_of(api, "s")
    callers = [e for e in log if not e.get("shadow")]
    shadows = [e for e in log if e.get("shadow")]
    assert len(callers) == 6 and {e["revision"] for e in callers} == {1}
    assert len(shadows) == 6 and {(e["revision"], e["endpoint"]) for e in shadows} == {
        (2, runner_b)
    }
    assert (await pairs(api, "s", revision="3"))["items"] == []


async def test_without_a_shadow_window_nothing_is_mirrored(
    api: Api, runner_a: str, runner_b: str
) -> None:
    await run_with_traffic(api, "n", target(1, 100, runner_a), target(2, 0, runner_b))
    for n in range(5):
        assert (
            await api.call("POST", f"{BASE}/n/invoke", body={"inputs": {"question": f"{n}"}})
        ).status == 200
    assert all(not e.get("shadow") for e in await log_of(api, "n"))
    assert (await pairs(api, "n"))["items"] == []


async def test_a_full_queue_drops_the_mirrored_call_and_counts_it(api: Api, runner_a: str) -> None:
    async with serving_gate() as (canary, arrived, release):
        await run_with_traffic(api, "q", target(1, 100, runner_a), shadowed(2, canary, queue=1))
        first = await api.call("POST", f"{BASE}/q/invoke", body={"inputs": {"question": "a"}})
        assert first.status == 200
        async with asyncio.timeout(DEADLINE_SECONDS):
            await arrived.wait()  # the one mirrored call the queue may hold is in flight
        for question in ("b", "c", "d"):
            reply = await api.call(
                "POST", f"{BASE}/q/invoke", body={"inputs": {"question": question}}
            )
            assert reply.status == 200 and reply.headers["X-Plnt-Revision"] == "1"
        assert (await pairs(api, "q", revision="2"))["dropped"] == 3
        metrics = (await api.call("GET", "/metrics")).text
        assert "plnt_apiserver_shadow_dropped_total 3.0" in metrics
        release.set()

        async def one() -> bool:
            return len((await pairs(api, "q", revision="2"))["items"]) == 1

        await eventually(one, what="the held pair recorded")
    (pair,) = (await pairs(api, "q"))["items"]
    assert pair["inputs"] == {"question": "a"} and pair["canary"]["output"] == "held"


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


async def _timed_calls(api: Api, name: str, count: int) -> list[float]:
    took: list[float] = []
    for n in range(count):
        began = time.perf_counter()
        reply = await api.call(
            "POST", f"{BASE}/{name}/invoke", body={"inputs": {"question": f"t{n}"}}
        )
        took.append(time.perf_counter() - began)
        assert reply.status == 200 and reply.headers["X-Plnt-Revision"] == "1"
    return took


@pytest.fixture
async def slow_canary() -> AsyncIterator[str]:
    """A canary runner whose every model call takes 300 ms (the echo backend's delay)."""
    spec = str(EXAMPLES / "chat.workflow.yaml")
    args = ("--spec", spec, "--backend-type", "echo", "--latency-ms", "300")
    async with runner_process(*args) as (_, url):
        yield url


async def test_a_caller_does_not_wait_for_the_shadow_call(
    api: Api, runner_a: str, slow_canary: str
) -> None:
    await run_with_traffic(api, "l", target(1, 100, runner_a), target(2, 0, slow_canary))
    before = await _timed_calls(api, "l", 15)
    windowed = {"status": {"traffic": [target(1, 100, runner_a), shadowed(2, slow_canary)]}}
    patched = await api.call("PATCH", f"{BASE}/l/status", body=windowed, headers=MERGE)
    assert patched.status == 200, patched.text
    during = await _timed_calls(api, "l", 15)
    after_window = {"status": {"traffic": [target(1, 100, runner_a), target(2, 0, slow_canary)]}}
    assert (
        await api.call("PATCH", f"{BASE}/l/status", body=after_window, headers=MERGE)
    ).status == 200
    after = await _timed_calls(api, "l", 15)
    found = await pairs(api, "l", revision="2")
    canary_ms = (
        statistics.median(p["canary"]["durationMs"] for p in found["items"])
        if found["items"]
        else None
    )
    baseline = max(_median_ms(before), _median_ms(after))
    # Not beyond the noise between the two unshadowed runs of the same test (generously).
    assert _median_ms(during) <= 3 * baseline, (before, during, after)
    if canary_ms is not None:  # the canary is slow: a caller that waited would show it
        assert _median_ms(during) < canary_ms, (during, canary_ms)
