"""`python -m plnt.bench apiserver`: plnt over HTTPS against raw etcd and a bare HTTPS handler.

The `wrk` phase (on by default) repeats GET and CREATE with a C client (`wrk`) at
`--wrk-connections` against etcd's HTTP gateway, the bare handler and plnt; without wrk
installed it prints a MISSING line and the other phases run as before.

    python -m plnt.bench apiserver [--quick] [--concurrency 30] [...]

Parses the flags into `ApiBenchmarkSettings`, runs `apiserver_running.bench` in a temporary
directory and prints `apiserver_report.report`. Misses of a target are printed, never
turned into a non-zero exit status. See bench/README.md for every flag and number.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from plnt.bench import apiserver_report, apiserver_running
from plnt.bench.settings import (
    API_PHASES,
    DEFAULT_API_PHASES,
    QUICK,
    ApiBenchmarkSettings,
    counts,
)

SIZED = (
    "list_concurrency",
    "objects",
    "duration",
    "warmup",
    "watchers",
    "watch_events",
    "watch_rate",
)
"""Flags whose default depends on `--quick`."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench apiserver", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="small numbers, about 20 s")
    p.add_argument("--concurrency", type=int, default=30)
    p.add_argument(
        "--list-concurrency", type=int, help="concurrent full lists (default 1: time per list)"
    )
    p.add_argument("--objects", type=int, help="objects to list (10000)")
    p.add_argument(
        "--get-objects",
        type=int,
        default=0,
        help="GET cycles over the first N objects (default all: mostly first reads)",
    )
    p.add_argument("--page", type=int, default=500)
    p.add_argument("--duration", type=float, help="seconds per phase (5)")
    p.add_argument("--warmup", type=float, help="seconds before each (1)")
    p.add_argument("--watchers", type=int, help="watchers (200)")
    p.add_argument("--watch-events", type=int, help="creates watched (500)")
    p.add_argument("--watch-rate", type=float, help="creates/s (100)")
    p.add_argument(
        "--phases",
        default=",".join(DEFAULT_API_PHASES),
        help="comma-separated subset of "
        + ",".join(API_PHASES)
        + " (reads: consistent reads against resourceVersion=0 and raw etcd)",
    )
    p.add_argument(
        "--api-only", action="store_true", help="skip raw etcd and bare phases (for profiling)"
    )
    p.add_argument("--no-fsync", action="store_true", help="etcd --unsafe-no-fsync")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    p.add_argument("--server-cprofile", type=Path, help="cProfile the server into this file")
    p.add_argument("--py-spy", type=Path, help="record the server with py-spy (speedscope file)")
    p.add_argument(
        "--wrk-connections",
        type=counts,
        default=(1, 16),
        help="the wrk phase's connection counts, one request in flight each (1,16)",
    )
    p.add_argument(
        "--workers",
        type=counts,
        default=(1,),
        help="API server processes sharing the port; comma-separated (1,2) runs once per "
        "count and prints each phase's throughput ratio to the first",
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> ApiBenchmarkSettings:
    """The flags as settings; a flag left out takes `--quick`'s value or the full default."""
    p = parser()
    args = p.parse_args(argv)
    phases = frozenset(args.phases.split(","))
    if not phases <= set(API_PHASES):
        p.error(f"--phases: unknown {','.join(sorted(phases - set(API_PHASES)))}")
    if args.py_spy is not None and apiserver_running.py_spy_binary() is None:
        # An optional tool of one flag: not a dependency of plnt (see docs/dependencies.md).
        p.exit(1, "error: --py-spy needs the py-spy package: pip install py-spy\n")
    base = QUICK if args.quick else ApiBenchmarkSettings()
    given = {name: getattr(args, name) for name in SIZED if getattr(args, name) is not None}
    return dataclasses.replace(
        base,
        **given,
        concurrency=args.concurrency,
        page=args.page,
        get_objects=args.get_objects,
        phases=phases,
        api_only=args.api_only,
        no_fsync=args.no_fsync,
        json_file=args.json,
        server_cprofile=args.server_cprofile,
        py_spy=args.py_spy,
        api_processes=args.workers,
        wrk_connections=args.wrk_connections,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    started = time.monotonic()
    runs: dict[int, apiserver_report.Results] = {}
    for count in settings.api_processes:
        with tempfile.TemporaryDirectory(prefix="plnt-bench-") as tmp:
            results = asyncio.run(apiserver_running.bench(settings, Path(tmp), api_processes=count))
        runs[count] = results
        if len(settings.api_processes) > 1:
            print(f"== --workers {count}")
        for line in apiserver_report.report(results, settings):
            print(line)
    for line in api_process_ratios(runs):
        print(line)
    print(f"total {time.monotonic() - started:.0f}s")
    if settings.json_file is not None:
        if len(runs) == 1:
            document = apiserver_report.as_json(next(iter(runs.values())))
        else:
            document = {
                "workers": {
                    str(count): apiserver_report.as_json(results) for count, results in runs.items()
                }
            }
        settings.json_file.write_text(json.dumps(document, indent=2) + "\n")
    return 0


API_PROCESSES_TARGET = 1.5
"""The throughput two workers should reach against one (each phase's plnt side)."""


def api_process_ratios(runs: dict[int, apiserver_report.Results]) -> list[str]:
    """Each plnt phase's requests/s at every count against the first count's (none for one)."""
    if len(runs) < 2:
        return []
    (first, baseline), *others = runs.items()
    lines = [f"plnt throughput against --workers {first} (target x{API_PROCESSES_TARGET} at 2):"]
    for phase, stats in baseline.api.items():
        for count, results in others:
            other = results.api.get(phase)
            if other is None or stats.rate == 0:
                continue
            ratio = other.rate / stats.rate
            miss = "  (below target)" if count == 2 * first and ratio < API_PROCESSES_TARGET else ""
            lines.append(
                f"  {phase:<8} --workers {count}: {other.rate:8.0f}/s vs "
                f"{stats.rate:8.0f}/s  x{ratio:.2f}{miss}"
            )
    return lines
