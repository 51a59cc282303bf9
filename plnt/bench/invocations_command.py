"""`python -m plnt.bench invocations`: a durable Invocation against a synchronous invoke and
against bare Temporal, and the API server's memory with finished Invocations cached.

    python -m plnt.bench invocations [--concurrency 30] [--duration 20] [--rss-objects 10000]

Parses the flags into `InvocationsBenchmarkSettings`, runs `invocations_running.bench` in a
temporary directory, prints `invocations.report` and, last, the results as one JSON line.
A missed target is printed, never turned into a non-zero exit status. See
docs/benchmarks.md ("Invocations") for what each number means.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from plnt.bench import invocations, invocations_running, reports
from plnt.bench.settings import InvocationsBenchmarkSettings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench invocations", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--concurrency", type=int, default=30, help="calls at once, wide phases (30)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds per wide phase (20)")
    p.add_argument(
        "--sequential-duration", type=float, help="seconds per c=1 phase (default: --duration)"
    )
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before each phase (2)")
    p.add_argument(
        "--rss-objects",
        type=int,
        default=10_000,
        help="WorkflowRuns, and finished Invocations, cached for the memory phase (10000; 0 skips)",
    )
    p.add_argument(
        "--deploy-timeout", type=float, default=120.0, help="seconds the deploy may take (120)"
    )
    p.add_argument("--json", type=Path, help="also write the results to this file")
    return p


def parse_args(argv: Sequence[str] | None = None) -> InvocationsBenchmarkSettings:
    p = parser()
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.rss_objects < 0 or args.duration <= 0:
        p.error("--concurrency must be at least 1, --duration positive, --rss-objects >= 0")
    return InvocationsBenchmarkSettings(
        concurrency=args.concurrency,
        duration=args.duration,
        sequential_duration=(
            args.sequential_duration if args.sequential_duration is not None else args.duration
        ),
        warmup=args.warmup,
        rss_objects=args.rss_objects,
        deploy_timeout=args.deploy_timeout,
        json_file=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-invocations-") as tmp:
        results = asyncio.run(invocations_running.bench(settings, Path(tmp)))
    reports.emit(
        invocations.report(results, settings),
        invocations.as_json(results, settings),
        started=started,
        json_file=settings.json_file,
    )
    return 0
