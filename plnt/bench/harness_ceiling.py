"""`python -m plnt.bench harness`: the load generator's ceiling against the echo runner.

    python -m plnt.bench harness [--rate 2000] [--duration 5] [--warmup 1]
                                 [--concurrency 64] [--runners 1] [--loop uvloop|asyncio]
                                 [--json FILE]

One run starts `--runners` runner processes of a one-step workflow (a `transform` that
echoes its inputs, step cache off, so every request runs it) and the bare-aiohttp floor
(`harness_floor`: one handler answering the runner's answer as fixed bytes), each in its
own process, then drives them with `plnt.harness` from this one, on uvloop (measured here:
about a third less of the generator's CPU per request than asyncio's loop; `--loop
asyncio` to compare):

* the ceiling: a closed loop of `--concurrency` in flight against the runners, and the
  same against the floor: requests/s, the generator's CPU (its process's CPU seconds per
  second: 1.0 is one core), and the ratio runner/floor (near 1: the generator is what
  limits; well below: the runner is);
* the generator's capacity on one core: 1 / its CPU time per request against the floor
  (a bound that holds on a machine too busy to give the generator its core; CPU per
  request only grows with contention, so it errs low);
* the target: an open loop at `--rate` against the runners and against the floor:
  achieved against requested rate, p50/p99 (from the due instant), errors, and the
  generator's CPU. The target is an achieved rate of at least 2,000 requests/s against
  the echo runner.

The numbers are taken in one run on one machine and printed, never asserted; a miss is
printed, not an exit status. Errors: `BenchmarkError` (a child did not start).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvloop

from plnt.bench import children
from plnt.harness import BenchResult, Endpoint, LoadPlan, run

TARGET_RATE = 2000.0
ECHO_WORKFLOW = """\
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: echo}
inputs: {type: object}
steps:
  - {id: echo, kind: transform, expression: inputs, cache: false}
output: steps.echo.output
"""


@dataclass(frozen=True, slots=True)
class CeilingSettings:
    rate: float = TARGET_RATE
    duration: float = 5.0
    warmup: float = 1.0
    concurrency: int = 64
    runners: int = 1
    loop: str = "uvloop"


@dataclass
class CeilingResults:
    runner_closed: BenchResult | None = None
    floor_closed: BenchResult | None = None
    runner_open: BenchResult | None = None
    floor_open: BenchResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        if self.runner_closed is None or self.floor_closed is None:
            return 0.0
        floor = self.floor_closed.achieved_rate
        return self.runner_closed.achieved_rate / floor if floor else 0.0


@contextlib.asynccontextmanager
async def running_runners(count: int, workdir: Path) -> AsyncIterator[list[str]]:
    """`count` echo runner processes; yields their base URLs."""
    spec = workdir / "echo.workflow.yaml"
    spec.write_text(ECHO_WORKFLOW)
    async with contextlib.AsyncExitStack() as stack:
        urls = []
        for _ in range(count):
            child = await stack.enter_async_context(
                children.running_runner(spec, "--backend-type", "echo", what="the echo runner")
            )
            urls.append(child.url)
        yield urls


@contextlib.asynccontextmanager
async def running_floor() -> AsyncIterator[str]:
    """The bare-aiohttp floor in its own process; yields its base URL."""
    argv = [sys.executable, "-m", "plnt.bench.harness_floor", "--port", "0"]
    async with children.running_child(argv, ready="listening on", what="the floor") as child:
        yield child.url


def _endpoints(label: str, bases: Sequence[str]) -> list[Endpoint]:
    return [Endpoint(label, f"{base}/invoke") for base in bases]


async def bench(settings: CeilingSettings, workdir: Path) -> CeilingResults:
    """Start the children, run the four phases one after another, return what they measured."""
    results = CeilingResults()
    inputs = tuple({"seq": index} for index in range(64))
    closed = LoadPlan(
        duration_seconds=settings.duration,
        warmup_seconds=settings.warmup,
        concurrency=settings.concurrency,
        inputs=inputs,
    )
    opened = LoadPlan(
        duration_seconds=settings.duration,
        warmup_seconds=settings.warmup,
        rate=settings.rate,
        inputs=inputs,
    )
    async with running_runners(settings.runners, workdir) as runners, running_floor() as floor:
        [results.runner_closed] = await run(closed, _endpoints("runner", runners))
        [results.floor_closed] = await run(closed, _endpoints("floor", [floor]))
        [results.runner_open] = await run(opened, _endpoints("runner", runners))
        [results.floor_open] = await run(opened, _endpoints("floor", [floor]))
    return results


def _closed_line(name: str, result: BenchResult | None) -> str:
    if result is None:
        return f"  {name:<12} not measured"
    return (
        f"  {name:<12} {result.achieved_rate:>8,.0f} req/s   p50 {result.latency.p50_ms:6.2f} ms"
        f"   p99 {result.latency.p99_ms:7.2f} ms   errors {sum(result.errors.values())}"
        f"   generator CPU {result.generator_cpu_ratio:.2f} core"
        f" ({_per_request_us(result):.0f} µs/request)"
    )


def _per_request_us(result: BenchResult) -> float:
    answered = result.achieved_rate * result.duration_seconds
    return result.generator_cpu_seconds / answered * 1e6 if answered else 0.0


def _open_line(name: str, result: BenchResult | None) -> str:
    if result is None:
        return f"  {name:<12} not measured"
    requested = result.requested_rate or 0.0
    return (
        f"  {name:<12} {result.achieved_rate:>8,.0f} of {requested:,.0f} req/s"
        f"   p50 {result.latency.p50_ms:7.2f} ms   p99 {result.latency.p99_ms:8.2f} ms"
        f"   errors {sum(result.errors.values())}"
        f"   generator CPU {result.generator_cpu_ratio:.2f} core"
    )


def report(results: CeilingResults, settings: CeilingSettings) -> list[str]:
    """The human-readable lines."""
    runners = f"{settings.runners} echo runner{'s' if settings.runners > 1 else ''}"
    lines = [
        f"harness ceiling ({settings.loop} loop; {runners}; {settings.duration:g} s measured"
        f" after {settings.warmup:g} s warm-up)",
        f"closed loop, {settings.concurrency} in flight:",
        _closed_line("echo runner", results.runner_closed),
        _closed_line("bare floor", results.floor_closed),
        f"  ratio runner/floor {results.ratio:.2f}",
        f"open loop at {settings.rate:,.0f} req/s (latency from the due instant):",
        _open_line("echo runner", results.runner_open),
        _open_line("bare floor", results.floor_open),
    ]
    if results.floor_closed is not None and _per_request_us(results.floor_closed):
        capacity = 1e6 / _per_request_us(results.floor_closed)
        lines.append(
            f"generator capacity on one core (1 / its CPU per request against the floor):"
            f" {capacity:,.0f} req/s"
        )
    achieved = results.runner_open.achieved_rate if results.runner_open else 0.0
    verdict = "PASS" if achieved >= TARGET_RATE * 0.99 else "MISS"
    lines.append(
        f"target: >= {TARGET_RATE:,.0f} req/s sustained against the echo runner:"
        f" {achieved:,.0f} req/s  {verdict}"
    )
    return lines + results.notes


def to_json(results: CeilingResults, settings: CeilingSettings) -> dict[str, Any]:
    def part(result: BenchResult | None) -> dict[str, Any] | None:
        return result.to_json() if result is not None else None

    return {
        "settings": {
            "rate": settings.rate,
            "duration": settings.duration,
            "warmup": settings.warmup,
            "concurrency": settings.concurrency,
            "runners": settings.runners,
            "loop": settings.loop,
        },
        "runnerClosed": part(results.runner_closed),
        "floorClosed": part(results.floor_closed),
        "runnerOpen": part(results.runner_open),
        "floorOpen": part(results.floor_open),
        "ratio": results.ratio,
    }


def parse_args(argv: Sequence[str] | None) -> tuple[CeilingSettings, Path | None]:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench harness", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--rate", type=float, default=TARGET_RATE, help="open-loop requests/s")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per phase")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per phase")
    p.add_argument("--concurrency", type=int, default=64, help="closed-loop requests in flight")
    p.add_argument("--runners", type=int, default=1, help="echo runner processes")
    p.add_argument(
        "--loop",
        choices=["uvloop", "asyncio"],
        default="uvloop",
        help="the generator's event loop (uvloop: about a third less CPU per request)",
    )
    p.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = p.parse_args(argv)
    settings = CeilingSettings(
        rate=args.rate,
        duration=args.duration,
        warmup=args.warmup,
        concurrency=args.concurrency,
        runners=args.runners,
        loop=args.loop,
    )
    return settings, args.json


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plnt-bench-harness-") as workdir:
        if settings.loop == "uvloop":
            results = uvloop.run(bench(settings, Path(workdir)))
        else:
            results = asyncio.run(bench(settings, Path(workdir)))
    for line in report(results, settings):
        print(line)
    if json_path is not None:
        json_path.write_text(json.dumps(to_json(results, settings), indent=2) + "\n")
    return 0
