"""`python -m plnt.bench overload`: a runner in front of a one-at-a-time model server, offered
4x and 10x what it serves, with and without admission.

    python -m plnt.bench overload [--service-ms 100] [--duration 5] [--multipliers 4,10]
                                  [--timeout 2] [--model [--model-tokens 4]] [--json FILE]

The model server is a stand-in that behaves as llama.cpp's does: one generation at a time,
`--service-ms` each (capacity 1000/service-ms calls per second), and a generation once
started runs to its end even when its caller has gone (a queued request is generated for
whoever asked). With `--model`, the load is aimed at the real model instead: plnt's own
model server on the pinned Gemma (llama.cpp, one generation at a time; the `llm` extra),
whose capacity is measured first (answers of `--model-tokens` tokens, one at a time) and
whose generations are its own `/metrics` count (`plnt.bench.overload_model`). A runner
(the real app, in this process, on a loopback port) serves a one-model-step workflow with
the step cache off against it (`--model`: the count continuation of
`plnt.bench.continuations`). Callers arrive open-loop at
`multiplier x capacity` per second for `--duration` seconds, each with `--timeout` seconds
to live, sent as `X-Plnt-Timeout-Ms` and enforced on the caller's side too.

Two runs per multiplier: `unguarded` (no admission limit: what plnt did before deadlines
and admission) and `guarded` (`maxConcurrency` 1, a queue of 2, the deadline carried to
the backend). Each prints: goodput (answers within the deadline per second) over offered
and over capacity, the shed answers' latency (p50, p99), amplification (generations the
model server started per admitted call; retries included), and recovery: after the load
stops, the time until a new call is answered. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from plnt.bench import local_serving
from plnt.runner import app as runner_app
from plnt.runner import settings

if TYPE_CHECKING:  # imported when asked for: it needs the `llm` extra's weights
    from plnt.bench import overload_model

SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: overload}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
steps:
  - id: ask
    kind: model
    prompt: "{{ inputs.q }}"
    cache: false
    retries: 1
output: steps.ask.output
"""


@dataclass
class ModelServer:
    """The one-at-a-time stand-in: generations started and finished."""

    service_seconds: float
    started: int = 0
    finished: int = 0

    def app(self) -> web.Application:
        lock = asyncio.Lock()

        async def generate(prompt: str) -> str:
            async with lock:
                self.started += 1
                await asyncio.sleep(self.service_seconds)
                self.finished += 1
                return prompt

        async def chat(request: web.Request) -> web.Response:
            body = await request.json()
            prompt = str(body["messages"][-1]["content"])
            # Shielded: like llama.cpp, a generation runs on when its caller goes away.
            text = await asyncio.shield(generate(prompt))
            message = {"role": "assistant", "content": text}
            return web.json_response(
                {"choices": [{"message": message, "finish_reason": "stop", "index": 0}]}
            )

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        return app


@dataclass(frozen=True)
class Target:
    """What the load is aimed at: a one-at-a-time model server and how to ask it."""

    endpoint: str
    """Its OpenAI base URL."""
    model: str
    spec: str
    """The workflow the runner serves against it."""
    service_seconds: float
    """One call's time, alone: capacity is its inverse."""
    generations: Callable[[], Awaitable[int]]
    """Generations the server started since the target was made."""
    inputs: Callable[[int], dict[str, Any]]
    """The workflow's inputs for the call numbered so."""


@asynccontextmanager
async def stand_in(service_seconds: float) -> AsyncIterator[Target]:
    """A fresh stand-in model server (module docstring), served on a loopback port."""
    server = ModelServer(service_seconds)

    async def generations() -> int:
        return server.started

    async with _serving(server.app()) as url:
        yield Target(
            endpoint=f"{url}/v1",
            model="m",
            spec=SPEC,
            service_seconds=service_seconds,
            generations=generations,
            inputs=lambda index: {"q": f"q{index}"},
        )


@dataclass
class Result:
    """One run's figures."""

    mode: str
    multiplier: int
    offered_per_second: float
    capacity_per_second: float
    goodput_per_second: float
    answered_in_time: int
    shed: int
    late_or_failed: int
    shed_p50_ms: float | None
    shed_p99_ms: float | None
    amplification: float | None
    generations: int
    recovery_seconds: float | None


def _serving(app: web.Application) -> AbstractAsyncContextManager[str]:
    return local_serving.serving(app, handler_cancellation=True)


async def _one(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any], deadline: float
) -> tuple[int, float]:
    """(status, seconds) of one call; 0 when the caller gave up at its deadline."""
    began = time.perf_counter()
    headers = {"X-Plnt-Timeout-Ms": f"{deadline * 1000:.0f}"}
    try:
        async with asyncio.timeout(deadline):
            async with session.post(
                f"{url}/invoke", json={"inputs": inputs}, headers=headers
            ) as response:
                await response.read()
                return response.status, time.perf_counter() - began
    except TimeoutError:
        return 0, time.perf_counter() - began


async def _run(
    mode: str,
    multiplier: int,
    *,
    target: AbstractAsyncContextManager[Target],
    duration: float,
    deadline: float,
    spec: Path,
) -> Result:
    async with target as aimed:
        capacity = 1.0 / aimed.service_seconds
        await asyncio.to_thread(spec.write_text, aimed.spec)
        limits: dict[str, Any] = (
            {"max_concurrency": 1, "max_queue": 2, "max_queue_seconds": deadline}
            if mode == "guarded"
            else {}
        )
        backend = settings.BackendConfig(
            type="openai", endpoint=aimed.endpoint, model=aimed.model, name="model", **limits
        )
        app = runner_app.build_app(
            settings.RunnerSettings(spec_path=spec, backend=backend, cache_max_entries=0)
        )
        async with (
            _serving(app) as url,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
        ):
            rate = capacity * multiplier
            calls = int(rate * duration)
            tasks = []
            began = time.perf_counter()
            for index in range(calls):
                call = _one(session, url, aimed.inputs(index), deadline)
                tasks.append(asyncio.create_task(call))
                pause = began + (index + 1) / rate - time.perf_counter()
                if pause > 0:
                    await asyncio.sleep(pause)  # the arrival schedule (open loop)
            answers = await asyncio.gather(*tasks)
            generations_during = await aimed.generations()
            ended = time.perf_counter()
            recovery = None
            while time.perf_counter() - ended < 60:
                status, _ = await _one(session, url, aimed.inputs(-1), deadline)
                if status == 200:
                    recovery = time.perf_counter() - ended
                    break
    ok = [seconds for status, seconds in answers if status == 200 and seconds <= deadline]
    shed = sorted(seconds for status, seconds in answers if status in (429, 503))
    admitted = len(answers) - len(shed)
    return Result(
        mode=mode,
        multiplier=multiplier,
        offered_per_second=round(calls / duration, 2),
        capacity_per_second=round(capacity, 2),
        goodput_per_second=round(len(ok) / duration, 2),
        answered_in_time=len(ok),
        shed=len(shed),
        late_or_failed=len(answers) - len(ok) - len(shed),
        shed_p50_ms=round(statistics.median(shed) * 1000, 2) if shed else None,
        shed_p99_ms=round(shed[min(len(shed) - 1, int(len(shed) * 0.99))] * 1000, 2)
        if shed
        else None,
        amplification=round(generations_during / admitted, 3) if admitted else None,
        generations=generations_during,
        recovery_seconds=None if recovery is None else round(recovery, 3),
    )


def _print(result: Result) -> None:
    goodput = result.goodput_per_second
    print(
        f"{result.mode:9} {result.multiplier:>3}x  offered {result.offered_per_second:6.1f}/s"
        f"  goodput {goodput:5.1f}/s ({goodput / result.offered_per_second:4.0%} of offered,"
        f" {goodput / result.capacity_per_second:4.0%} of capacity)"
        f"  in time {result.answered_in_time:4}  shed {result.shed:4}"
        f"  late/failed {result.late_or_failed:4}"
        f"  shed p50/p99 {result.shed_p50_ms} / {result.shed_p99_ms} ms"
        f"  generations/admitted {result.amplification}"
        f"  recovery {result.recovery_seconds} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plnt.bench overload", description=__doc__)
    parser.add_argument("--service-ms", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--multipliers", default="4,10")
    parser.add_argument("--timeout", type=float, default=2.0, help="Each caller's deadline (s).")
    parser.add_argument("--modes", default="unguarded,guarded")
    parser.add_argument(
        "--model", action="store_true", help="Aim at the pinned real model, not the stand-in."
    )
    parser.add_argument(
        "--model-tokens", type=int, default=4, help="With --model: tokens per answer."
    )
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args(argv)
    multipliers = [int(part) for part in args.multipliers.split(",") if part]
    modes = [part for part in args.modes.split(",") if part]
    results = []
    with tempfile.TemporaryDirectory() as directory, contextlib.ExitStack() as stack:
        spec = Path(directory) / "overload.workflow.yaml"
        real: overload_model.RealModel | None = None
        if args.model:
            from plnt.bench import overload_model

            real = stack.enter_context(
                overload_model.RealModel.started(Path(directory), tokens=args.model_tokens)
            )
            print(real.describe())

        def target() -> AbstractAsyncContextManager[Target]:
            return real.target() if real is not None else stand_in(args.service_ms / 1000.0)

        for multiplier in multipliers:
            for mode in modes:
                result = asyncio.run(
                    _run(
                        mode,
                        multiplier,
                        target=target(),
                        duration=args.duration,
                        deadline=args.timeout,
                        spec=spec,
                    )
                )
                _print(result)
                results.append(result)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(result) for result in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
