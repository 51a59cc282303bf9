"""What each benchmark was asked for: frozen settings built once from the command line.

Why dataclasses and not the parsed `argparse.Namespace`: the runs and reports are typed
code under mypy strict, and a Namespace's attributes are `Any`; a misspelt flag name
would pass unnoticed until the phase that reads it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

DEFAULT_API_PHASES = ("get", "create", "list", "watch", "wrk")
API_PHASES = (*DEFAULT_API_PHASES, "reads")
"""`reads` (consistent reads against resourceVersion=0 and raw etcd) runs only when asked."""


@dataclass(frozen=True, slots=True)
class ApiBenchmarkSettings:
    """The API server benchmark (`python -m plnt.bench apiserver`); see bench/README.md."""

    concurrency: int = 30
    list_concurrency: int = 1
    objects: int = 10_000
    get_objects: int = 0
    """GET cycles over the first this many objects (0: all `objects`, each read rarely)."""
    page: int = 500
    duration: float = 5.0
    warmup: float = 1.0
    watchers: int = 200
    watch_events: int = 500
    watch_rate: float = 100.0
    phases: frozenset[str] = frozenset(DEFAULT_API_PHASES)
    api_only: bool = False
    no_fsync: bool = False
    json_file: Path | None = None
    server_cprofile: Path | None = None
    py_spy: Path | None = None
    wrk_connections: tuple[int, ...] = (1, 16)
    """The `wrk` phase's connections (one request in flight each): GET and CREATE on etcd's
    HTTP gateway, the bare handler and plnt, at each count."""
    api_processes: tuple[int, ...] = (1,)
    """API server processes of each run (`--workers 1,2`: the whole run once per count,
    then the ratios of each phase's throughput to the first count's)."""


QUICK = ApiBenchmarkSettings(objects=2000, duration=1.5, warmup=0.3, watchers=50, watch_events=50)
"""`--quick`: small numbers, about 20 s."""


@dataclass(frozen=True, slots=True)
class SagaBenchmarkSettings:
    """The deploy saga benchmark (`python -m plnt.bench saga`); see docs/benchmarks.md."""

    deploys: int = 20
    concurrency: int = 16
    duration: float = 5.0
    sequential_duration: float = 5.0
    warmup: float = 0.5
    deploy_timeout: float = 120.0
    runner_starts: int = 10
    creates: int = 300
    create_concurrency: int = 30
    create_rounds: int = 2
    own_core: bool = False
    """The burst's Temporal on a core of its own (`starts.BurstSettings.own_core`)."""
    evaluation_cases: int = 0
    """Cases of a quality gate (`spec.canary.evaluation`) on every deploy; 0: none."""
    api_processes: int = 1
    """API server processes of the deploys' and invokes' `plnt up` (`--workers`)."""
    json_file: Path | None = None


@dataclass(frozen=True, slots=True)
class InvocationsBenchmarkSettings:
    """What `python -m plnt.bench invocations` was asked for (docs/benchmarks.md)."""

    concurrency: int = 30
    duration: float = 20.0
    sequential_duration: float = 20.0
    warmup: float = 2.0
    rss_objects: int = 10_000
    deploy_timeout: float = 120.0
    json_file: Path | None = None


def counts(text: str) -> tuple[int, ...]:
    """Comma-separated counts, each at least 1, of the apiserver and proxy benchmarks:
    `--workers 1,2` (API server processes, each count a run of its own) and
    `--wrk-connections 1,16` (an argparse `type`: its error names the flag)."""
    try:
        found = tuple(int(count) for count in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of counts"
        ) from None
    if min(found) < 1:
        raise argparse.ArgumentTypeError("each count must be at least 1")
    return found
