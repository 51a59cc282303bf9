"""`python -m plnt.bench saga`: saga starts, apply → Ready latency, and invoke through plnt.

    python -m plnt.bench saga [--creates 300] [--own-core] [--deploys 20] [--concurrency 16] [...]

Parses the flags into `SagaBenchmarkSettings`, runs the create burst (`starts_running.bench`,
unless `--creates 0`) and then `saga_running.bench` (unless `--deploys 0`) in a temporary
directory, then times what a required signature adds to a pull (`signatures`, unless
`--signature-rounds 0`), prints `starts.report`, `saga.report` and the signature cost and,
last, the results as one JSON line. Misses of a
target are printed, never turned into a non-zero exit status. See docs/benchmarks.md
("Deploy saga") for what each number means.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from plnt.bench import reports, saga, saga_running, signatures, starts, starts_running
from plnt.bench.settings import SagaBenchmarkSettings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench saga", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument(
        "--creates",
        type=int,
        default=300,
        help="WorkflowRuns created, and bare workflows started, in the burst (300; 0 skips it)",
    )
    p.add_argument(
        "--create-concurrency", type=int, default=30, help="requests at once in the burst (30)"
    )
    p.add_argument(
        "--create-rounds",
        type=int,
        default=2,
        help="rounds of plnt creates, each after a round of bare starts (2)",
    )
    p.add_argument(
        "--own-core",
        action="store_true",
        help="in the burst, Temporal on the first core and everything else on the rest, "
        "as in a cluster whose Temporal has nodes of its own",
    )
    p.add_argument(
        "--deploys",
        type=int,
        default=20,
        help="WorkflowRuns deployed (20; 0 skips deploys and invoke)",
    )
    p.add_argument(
        "--runner-starts",
        type=int,
        default=10,
        help="runner starts timed each way, executed and forked, beside the deploys (10; 0 skips)",
    )
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
    p.add_argument(
        "--evaluation-cases",
        type=int,
        default=0,
        help="cases of a quality gate (spec.canary.evaluation) on every deploy (0: none)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="API server processes of plnt up for the deploys and invokes (1)",
    )
    p.add_argument(
        "--signature-rounds",
        type=int,
        default=50,
        help="pulls timed with a signature check, the cost it adds to a deploy (50; 0 skips)",
    )
    p.add_argument("--json", type=Path, help="also write the results to this file")
    return p


def parse_args(argv: Sequence[str] | None = None) -> SagaBenchmarkSettings:
    p = parser()
    args = p.parse_args(argv)
    if args.deploys < 0 or args.creates < 0 or args.runner_starts < 0:
        p.error("--deploys, --creates and --runner-starts cannot be negative")
    if args.deploys == 0 and args.creates == 0 and args.signature_rounds == 0:
        p.error("nothing to do: --deploys, --creates and --signature-rounds are all 0")
    if not 0 <= args.evaluation_cases <= 200:
        p.error("--evaluation-cases must be between 0 and 200")
    if args.create_concurrency < 1 or args.create_rounds < 1:
        p.error("--create-concurrency and --create-rounds must be at least 1")
    if args.workers < 1:
        p.error("--workers must be at least 1")
    return SagaBenchmarkSettings(
        deploys=args.deploys,
        concurrency=args.concurrency,
        duration=args.duration,
        sequential_duration=(
            args.sequential_duration if args.sequential_duration is not None else args.duration
        ),
        warmup=args.warmup,
        deploy_timeout=args.deploy_timeout,
        runner_starts=args.runner_starts,
        creates=args.creates,
        create_concurrency=args.create_concurrency,
        evaluation_cases=args.evaluation_cases,
        create_rounds=args.create_rounds,
        own_core=args.own_core,
        api_processes=args.workers,
        json_file=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    rounds = parser().parse_args(argv).signature_rounds
    started = time.monotonic()
    signed: signatures.SignatureCost | None = None
    burst: starts.BurstResults | None = None
    results = saga.SagaResults()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-saga-") as tmp:
        if settings.creates:
            burst_settings = starts.BurstSettings(
                settings.creates,
                settings.create_concurrency,
                settings.create_rounds,
                own_core=settings.own_core,
            )
            burst = asyncio.run(starts_running.bench(burst_settings, Path(tmp)))
        if settings.deploys:
            results = asyncio.run(saga_running.bench(settings, Path(tmp)))
        if rounds > 0:
            signed = asyncio.run(signatures.measure(Path(tmp), rounds=rounds))
    invoke = saga_running.invoke_settings(settings)
    lines = starts.report(burst) if burst is not None else []
    document = saga.as_json(results, invoke) if settings.deploys else {}
    if burst is not None:
        document["creates"] = starts.as_json(burst)
    if signed is not None:
        document.update(signatures.as_json(signed))
    reports.emit(
        lines + saga.report(results, invoke) + (signatures.report(signed) if signed else []),
        document,
        started=started,
        json_file=settings.json_file,
    )
    return 0
