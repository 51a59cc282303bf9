"""The real model (the pinned Gemma on llama.cpp, one generation at a time) under more load
than it serves, and killed while calls flow.

Overload: the model's capacity is measured first, straight on the model server (short
answers of `TOKENS` tokens, one at a time). A runner whose backend admits one call at a
time (`maxConcurrency: 1`, a queue of one) is then offered 4x and 10x that rate, open
loop, by callers whose deadline is three times one call's time (the slowest measured; at
least a second). A queued call waits at most half a call's time for the slot, so a call
that is admitted has more than two calls' time left for its own: every call is answered
200 or shed 503 with `Retry-After`, none runs out of time (504). The model server's own
request counter (its `/metrics`, which counts no probe) says how many generations the load
started: at most 1.1x the admitted calls, so nothing retried or generated for callers that
were refused.

Kill: a model server of the test's own (the session's shared one is never killed) behind
a runner with an echo fallback; it is SIGKILLed while calls flow, the breaker opens and
the fallback answers (marked), the server is started again on the same port and the
breaker closes: the model answers again.

The machine's speed only chooses the rate and the deadline; assertions are on counts and
statuses, never on durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from plnt.api import breakers as api_breakers
from plnt.bench import continuations
from plnt.processes import weights
from plnt.processes.modelserver import ModelServer
from plnt.runner import settings
from tests.support.model import COUNTING, PIN, complete
from tests.support.runners import StartRunner, counter_sum
from tests.support.waiting import eventually

TOKENS = 4
"""A short answer: the model's capacity in calls per second is high enough that a few
seconds of load are many calls."""
SPEC = continuations.spec_text(TOKENS)
CALIBRATION_CALLS = 5
DEADLINE_FLOOR_MS = 1000
"""The shortest deadline given: the callers and the runner share one event loop, whose
delays under a burst are not the model's."""
LOAD_SECONDS = 3.0
MAX_CALLS = 150
"""Calls per load at most (a fast machine at 10x ends the load sooner, at the same rate)."""
BACKEND = "gemma"
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Capacity:
    """What the model serves one call at a time, measured straight on its server."""

    median_seconds: float
    slowest_seconds: float

    @property
    def calls_per_second(self) -> float:
        return 1.0 / self.median_seconds

    @property
    def deadline_ms(self) -> int:
        """Three times one call's time (the slowest measured, for a machine that varies),
        and at least `DEADLINE_FLOOR_MS`."""
        return max(DEADLINE_FLOOR_MS, round(3 * self.slowest_seconds * 1000))


@pytest.fixture(scope="module")
def capacity(model_server: ModelServer) -> Capacity:
    complete(model_server, COUNTING, max_tokens=TOKENS, seed=0)  # warm: the first is slower
    durations = []
    for _ in range(CALIBRATION_CALLS):
        began = time.perf_counter()
        answer = complete(model_server, COUNTING, max_tokens=TOKENS, seed=0)
        durations.append(time.perf_counter() - began)
        assert answer["choices"][0]["finish_reason"] == "length", answer
    return Capacity(statistics.median(durations), max(durations))


async def _model_figures(session: aiohttp.ClientSession, server: ModelServer) -> dict[str, float]:
    """The model server's own `/metrics` (plnt_model_*), by name (one model, one series)."""
    async with session.get(f"{server.root}/metrics") as answer:
        assert answer.status == 200
        text = await answer.text()
    figures = {}
    for line in text.splitlines():
        if line.startswith("plnt_model_"):
            name, value = line.rsplit(" ", 1)
            figures[name.split("{", 1)[0]] = float(value)
    return figures


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


async def _call(
    session: aiohttp.ClientSession, url: str, *, headers: dict[str, str] | None = None
) -> Answer:
    async with session.post(
        f"{url}/invoke", json={"inputs": {"prefix": COUNTING}}, headers=headers or {}
    ) as answer:
        return Answer(answer.status, await answer.json(), dict(answer.headers))


async def _open_loop(
    session: aiohttp.ClientSession, url: str, *, rate: float, calls: int, deadline_ms: int
) -> list[Answer]:
    """`calls` calls at `rate` per second, sent on schedule whatever the answers."""
    headers = {"X-Plnt-Timeout-Ms": str(deadline_ms)}
    tasks = []
    began = time.perf_counter()
    for index in range(calls):
        tasks.append(asyncio.create_task(_call(session, url, headers=headers)))
        pause = began + (index + 1) / rate - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)  # the arrival schedule (open loop), not a wait
    return list(await asyncio.gather(*tasks))


@pytest.mark.parametrize("multiplier", [4, 10])
async def test_offered_many_times_its_capacity_the_model_serves_admitted_calls_and_sheds_the_rest(
    multiplier: int,
    capacity: Capacity,
    model_server: ModelServer,
    start_runner: StartRunner,
    write_spec: Callable[[str], Path],
) -> None:
    one_call = capacity.slowest_seconds
    backend = settings.BackendConfig(
        type="openai",
        endpoint=model_server.endpoint,
        model=model_server.model,
        name=BACKEND,
        max_concurrency=1,
        max_queue=1,
        max_queue_seconds=one_call / 2,
    )
    url = await start_runner(write_spec(SPEC), backend=backend, cache_max_entries=0)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        before = await _model_figures(session, model_server)
        rate = multiplier * capacity.calls_per_second
        calls = min(MAX_CALLS, max(2 * multiplier, round(rate * LOAD_SECONDS)))
        answers = await _open_loop(
            session, url, rate=rate, calls=calls, deadline_ms=capacity.deadline_ms
        )

        async def idle() -> dict[str, float] | None:
            figures = await _model_figures(session, model_server)
            busy = figures["plnt_model_requests_running"] + figures["plnt_model_requests_waiting"]
            return figures if busy == 0 else None

        after = await eventually(idle, within=60, what="the model server to finish the load")
        statuses = [answer.status for answer in answers]
        ok, shed = statuses.count(200), statuses.count(503)
        # Every call was served in time or shed at once: no admitted call ran out of time.
        others = [(a.status, a.body) for a in answers if a.status not in (200, 503)]
        assert ok + shed == calls, (capacity, ok, shed, others[:3])
        # Shedding happened, and the model served: how many of each depends on how fast a
        # shared machine's model runs during the load, which its measure only estimates.
        assert ok >= 2 and shed >= 1, (capacity, statuses)
        for answer in answers:
            if answer.status == 200:
                assert "5" in answer.body["output"], answer.body  # the model's continuation
            else:
                assert int(answer.headers["Retry-After"]) >= 1, answer.headers
                assert answer.body["error"]["backend"] == BACKEND, answer.body
                assert answer.body["error"]["queue"] == "admission queue", answer.body

        admitted = calls - shed
        generations = after["plnt_model_requests_total"] - before["plnt_model_requests_total"]
        assert ok <= generations <= 1.1 * admitted, (generations, admitted)
        assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == admitted
        assert await counter_sum(session, url, "plnt_runner_shed_calls_total") == shed

        # The load has stopped: the next call is the model's again.
        after_load = await _call(session, url, headers={"X-Plnt-Timeout-Ms": "30000"})
        assert after_load.status == 200 and "5" in after_load.body["output"], after_load


@pytest.fixture
def own_model_server(tmp_path: Path) -> Iterator[ModelServer]:
    """A model server this test alone uses (and kills): never the session's shared one."""
    server = ModelServer(PIN, weights.assemble(PIN), log_file=tmp_path / "killed-model.log")
    try:
        asyncio.run(server.astart())
        yield server
    finally:
        server.stop()


@dataclass
class Flow:
    """The answers of calls sent one after another until stopped."""

    answers: list[Answer] = field(default_factory=list)

    def from_model(self) -> list[Answer]:
        return [a for a in self.answers if a.status == 200 and "fallback" not in a.body]

    def from_fallback(self) -> list[Answer]:
        return [a for a in self.answers if a.status == 200 and "fallback" in a.body]


@contextlib.asynccontextmanager
async def _flowing(
    session: aiohttp.ClientSession, url: str, *, pause: float
) -> AsyncIterator[Flow]:
    """One caller calling again `pause` seconds after each answer: the model is never
    queued behind, and an open breaker's fast answers do not become a busy loop."""
    flow = Flow()

    async def call_on() -> None:
        while True:
            flow.answers.append(await _call(session, url))
            await asyncio.sleep(pause)  # the caller's pace, not a wait for anything

    caller = asyncio.create_task(call_on())
    try:
        yield flow
    finally:
        caller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await caller


async def _breaker(session: aiohttp.ClientSession, url: str) -> api_breakers.BreakerState:
    async with session.get(f"{url}{api_breakers.RUNNER_PATH}") as answer:
        assert answer.status == 200
        states = api_breakers.RunnerBreakers.model_validate(await answer.json()).breakers
    return next(state for state in states if state.backend == BACKEND)


async def test_a_model_server_killed_under_load_opens_the_breaker_the_fallback_serves_and_it_closes_after_the_restart(  # noqa: E501
    own_model_server: ModelServer,
    start_runner: StartRunner,
    write_spec: Callable[[str], Path],
) -> None:
    server = own_model_server
    backend = settings.BackendConfig(
        type="openai",
        endpoint=server.endpoint,
        model=server.model,
        name=BACKEND,
        breaker_failures=2,
        breaker_open_seconds=0.5,
        fallback=settings.BackendConfig(type="echo", name="small"),
    )
    url = await start_runner(write_spec(SPEC), backend=backend, cache_max_entries=0)
    port = server.port
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        async with _flowing(session, url, pause=0.05) as flow:
            await eventually(
                lambda: len(flow.from_model()) >= 2, within=60, what="answers from the model"
            )
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            await eventually(
                lambda: server.exit_code() == -signal.SIGKILL, within=10, what="the kill"
            )
            served_before = len(flow.from_model())
            await eventually(flow.from_fallback, within=30, what="an answer from the fallback")
            opened = await _breaker(session, url)
            assert opened.state in ("open", "half_open"), opened

            await server.arestart()
            assert server.port == port  # the runner's endpoint is right again

            async def closed() -> api_breakers.BreakerState | None:
                state = await _breaker(session, url)
                model_again = len(flow.from_model()) > served_before
                return state if state.state == "closed" and model_again else None

            closing = await eventually(closed, within=60, what="the breaker to close")
        assert closing.reason == "a probe call succeeded", closing

    statuses = {answer.status for answer in flow.answers}
    # The call in flight when the server died and the breaker's probes while it was down
    # failed (502: a probe is a call to the primary); every other call was answered.
    assert statuses <= {200, 502}, statuses
    for answer in flow.from_fallback():
        assert answer.body["fallback"] == "small" and answer.headers["X-Plnt-Fallback"] == "small"
        assert answer.body["output"] == COUNTING  # the echo backend's answer, not the model's
    assert any("5" in a.body["output"] for a in flow.from_model()[served_before:]), (
        "no answer from the restarted model"
    )
    async with aiohttp.ClientSession() as session:
        assert await counter_sum(session, url, "plnt_runner_fallback_calls_total") == len(
            flow.from_fallback()
        )


def test_the_overload_benchmark_aimed_at_the_model_sheds_without_amplification(
    tmp_path: Path,
) -> None:
    # The benchmark starts a model server of its own (and stops it), never the session's.
    results = tmp_path / "overload.json"
    command = [
        sys.executable, "-m", "plnt.bench", "overload", "--model",
        "--duration", "1", "--multipliers", "4", "--modes", "guarded", "--timeout", "5",
        "--json", str(results),
    ]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert finished.returncode == 0, finished.stderr
    assert f"model {PIN.name}: one answer of 4 tokens" in finished.stdout, finished.stdout
    (result,) = json.loads(results.read_text())
    assert result["shed"] > 0 and result["answered_in_time"] > 0, result
    assert result["amplification"] <= 1.1, result
    assert result["recovery_seconds"] is not None, result
