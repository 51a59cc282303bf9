"""`python -m plnt.bench saga`: apply → Ready latency, and invoke through plnt against its runner.

    python -m plnt.bench saga [--deploys 20] [--concurrency 16] [--duration 5] [...]

Parses the flags into `SagaBenchSettings`, runs `saga_running.bench` in a temporary
directory, prints `saga.report` and, last, the results as one JSON line. Misses of a
target are printed, never turned into a non-zero exit status. See docs/benchmarks.md
("Deploy saga") for what each number means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from plnt.bench import saga, saga_running
from plnt.bench.settings import SagaBenchSettings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench saga", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--deploys", type=int, default=20, help="WorkflowRuns deployed (20)")
    p.add_argument("--concurrency", type=int, default=16, help="invoke workers (16)")
    p.add_argument(
        "--duration", type=float, default=5.0, help="seconds per invoke phase (5; 0 skips invoke)"
    )
    p.add_argument(
        "--sequential-duration",
        type=float,
        help="seconds per concurrency-1 phase (default: --duration)",
    )
    p.add_argument("--warmup", type=float, default=0.5, help="seconds before each (0.5)")
    p.add_argument(
        "--deploy-timeout", type=float, default=120.0, help="seconds a deploy may take (120)"
    )
    p.add_argument("--json", type=Path, help="also write the results to this file")
    return p


def parse_args(argv: Sequence[str] | None = None) -> SagaBenchSettings:
    p = parser()
    args = p.parse_args(argv)
    if args.deploys < 1:
        p.error("--deploys must be at least 1")
    return SagaBenchSettings(
        deploys=args.deploys,
        concurrency=args.concurrency,
        duration=args.duration,
        sequential_duration=(
            args.sequential_duration if args.sequential_duration is not None else args.duration
        ),
        warmup=args.warmup,
        deploy_timeout=args.deploy_timeout,
        json_file=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-saga-") as tmp:
        results = asyncio.run(saga_running.bench(settings, Path(tmp)))
    invoke = saga_running.invoke_settings(settings)
    for line in saga.report(results, invoke):
        print(line)
    print(f"total {time.monotonic() - started:.0f}s, {os.cpu_count()} CPUs")
    document = saga.as_json(results, invoke)
    if settings.json_file is not None:
        settings.json_file.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, separators=(",", ":")), flush=True)
    return 0
