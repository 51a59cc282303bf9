"""The create burst of the saga benchmark: WorkflowRun creates against bare Temporal starts.

A WorkflowRun create is answered only after its saga was started (one Temporal
signal-with-start, `plnt.sagas.starter`), so on one Temporal server plnt can start sagas
no faster than that server starts bare workflows. The burst measures both in one run on
one server: `count` bare signal-with-starts of a workflow no worker polls (the floor)
and `count` WorkflowRun creates through the API server (`plnt up` without a worker, so
neither side has workflow tasks run), alternating `rounds` times, with a last floor
round after plnt's last (floor, plnt, floor, plnt, floor): on a shared machine the
floor moves during a run, and this brackets every plnt round between two floor rounds.

**Started/s** counts only the starts acknowledged before the answer: a bare start's
answer, and a create answered without a `Warning` (a create whose start failed is stored
and answered with a Warning, its saga started later by the retry loop; it counts in
`deferred`, not in the rate). **Saga-start latency** is the time from sending the
request to that acknowledgement, so for plnt it is the create's answer latency. After
each burst Temporal's visibility must list every started workflow (`listed`), which
checks that an answer claiming a start had one.

The ratio is plnt's mean started/s over the floor's mean started/s.

**CPU per item**, by process (Temporal, the API server `plnt up`, its etcd, this load
generator; from `/proc`, so Linux only), says where a round's cycles went: on a small
machine every process shares the same cores, so what plnt and etcd spend per create is
taken from the Temporal server that the floor has to itself. With `--own-core`
(`BurstSettings.own_core`) Temporal has the first core to itself in both kinds of round
and the rest run on the others, as in a cluster, whose Temporal runs on nodes of its own:
the ratio then says whether plnt keeps up with its Temporal rather than how much of the
shared cores it takes from it.

Errors: none of its own; a failed request counts in `BurstStats.errors`.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plnt.bench import apiserver as harness
from plnt.bench import cputime, reports

CREATE_RATIO_TARGET = 0.9


@dataclass(frozen=True, slots=True)
class BurstSettings:
    """How many items each burst sends, how many at once, and how many plnt rounds."""

    count: int = 300
    concurrency: int = 30
    rounds: int = 2
    own_core: bool = False
    """Temporal on the first core, plnt, its etcd and the generator on the rest
    (`plnt.bench.cores`), for floor and plnt alike: the shape of a cluster, whose Temporal
    runs on nodes of its own."""


@dataclass(slots=True)
class BurstStats:
    """One burst: how each request was answered and how long the start took."""

    label: str
    started: int = 0  # acknowledged before the answer
    deferred: int = 0  # answered with a Warning: stored, started later
    errors: int = 0
    elapsed: float = 0.0  # first request sent to last answer
    start_latencies: list[float] = field(default_factory=list)  # of the `started`
    listed: int = 0  # workflows Temporal's visibility lists for this burst
    cpu_ms: dict[str, float] = field(default_factory=dict)  # process -> CPU ms per item

    @property
    def rate(self) -> float:
        """Starts acknowledged per second of the burst."""
        return self.started / self.elapsed if self.elapsed > 0 else 0.0

    def start_ms(self, q: float) -> float:
        return harness.percentile(self.start_latencies, q) * 1000.0


@dataclass(slots=True)
class BurstResults:
    """The floor rounds and plnt's rounds, in the order they ran."""

    settings: BurstSettings
    rounds: list[BurstStats] = field(default_factory=list)
    floors: list[BurstStats] = field(default_factory=list)
    plnt: list[BurstStats] = field(default_factory=list)
    cores: str = ""
    """How `own_core` split the cores; empty when every process shared them."""

    @property
    def floor_rate(self) -> float:
        return statistics.fmean(s.rate for s in self.floors) if self.floors else 0.0

    @property
    def plnt_rate(self) -> float:
        return statistics.fmean(s.rate for s in self.plnt) if self.plnt else 0.0

    @property
    def ratio(self) -> float:
        return self.plnt_rate / self.floor_rate if self.floor_rate else 0.0

    def cpu_row(self) -> cputime.CpuRow:
        """`plnt up`'s CPU per create (its API server; no worker runs) against Temporal's
        CPU per bare start, means over the rounds. Temporal also starts plnt's sagas, and
        etcd stores plnt's runs, so both are printed beside for plnt's rounds."""

        def mean(rounds: Sequence[BurstStats], name: str) -> float | None:
            values = [s.cpu_ms[name] for s in rounds if name in s.cpu_ms]
            return statistics.fmean(values) if values else None

        return cputime.CpuRow(
            "create/start",
            plnt="plnt up process (API server, no worker)",
            plnt_ms=mean(self.plnt, "plnt up"),
            floor="Temporal per bare start",
            floor_ms=mean(self.floors, "temporal"),
            beside=(
                ("Temporal during plnt's rounds", mean(self.plnt, "temporal")),
                ("etcd during plnt's rounds", mean(self.plnt, "etcd")),
                ("generator during plnt's rounds", mean(self.plnt, "generator")),
                ("generator during the floor's", mean(self.floors, "generator")),
            ),
        )


Answer = tuple[bool, bool]
"""(succeeded, the answer carried a Warning)."""

Operation = Callable[[int], Awaitable[Answer]]
"""One item by index."""


async def burst(
    label: str,
    operation: Operation,
    settings: BurstSettings,
    *,
    processes: Mapping[str, int] | None = None,
) -> BurstStats:
    """`settings.count` items, `settings.concurrency` at a time, each once; the CPU each
    of `processes` (name → pid) used meanwhile goes to `cpu_ms` per item."""
    stats = BurstStats(label)
    items = iter(range(settings.count))
    watched = dict(processes or {})
    before = {name: cputime.cpu_seconds(pid) for name, pid in watched.items()}
    start = time.perf_counter()

    async def caller() -> None:
        for index in items:
            began = time.perf_counter()
            ok, warned = await operation(index)
            if not ok:
                stats.errors += 1
            elif warned:
                stats.deferred += 1
            else:
                stats.started += 1
                stats.start_latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(caller() for _ in range(settings.concurrency)))
    stats.elapsed = time.perf_counter() - start
    for name, pid in watched.items():
        was, now = before[name], cputime.cpu_seconds(pid)
        if was is not None and now is not None and settings.count:
            stats.cpu_ms[name] = (now - was) * 1000.0 / settings.count
    return stats


# -- the report ---------------------------------------------------------------------------


def report(results: BurstResults) -> list[str]:
    s = results.settings
    lines = [
        f"create burst: {s.count} per round at concurrency {s.concurrency}, floor and plnt "
        "alternating on one Temporal server (no worker)",
        f"cores: {results.cores or 'shared by every process'}",
        f"{'round':<22}{'started/s':>10}{'start p50':>10}{'p95 ms':>8}{'p99 ms':>8}"
        f"{'errors':>7}{'deferred':>9}{'listed':>7}",
    ]
    for stats in results.rounds:
        cpu = ", ".join(f"{name} {ms:.1f}" for name, ms in stats.cpu_ms.items())
        lines.append(
            f"{stats.label:<22}{stats.rate:>10.1f}{stats.start_ms(0.5):>10.1f}"
            f"{stats.start_ms(0.95):>8.1f}{stats.start_ms(0.99):>8.1f}"
            f"{stats.errors:>7}{stats.deferred:>9}{stats.listed:>7}"
            + (f"  CPU ms/item: {cpu}" if cpu else "")
        )
    lines.append(
        f"ratio creates/bare starts {results.ratio:5.2f}  ({results.plnt_rate:.1f} vs "
        f"{results.floor_rate:.1f} started/s, means)  target >= {CREATE_RATIO_TARGET:.1f}  "
        f"{reports.verdict(results.ratio >= CREATE_RATIO_TARGET)}"
    )
    lines.append(results.cpu_row().line())
    return lines


def _one(stats: BurstStats) -> dict[str, Any]:
    return {
        "label": stats.label,
        "started": stats.started,
        "deferred": stats.deferred,
        "errors": stats.errors,
        "listed": stats.listed,
        "rate": stats.rate,
        "start_p50_ms": stats.start_ms(0.5),
        "start_p95_ms": stats.start_ms(0.95),
        "start_p99_ms": stats.start_ms(0.99),
        "cpu_ms_per_item": dict(stats.cpu_ms),
    }


def as_json(results: BurstResults) -> dict[str, Any]:
    def many(group: Sequence[BurstStats]) -> list[dict[str, Any]]:
        return [_one(stats) for stats in group]

    return {
        "count": results.settings.count,
        "concurrency": results.settings.concurrency,
        "cores": results.cores,
        "plnt": many(results.plnt),
        "floors": many(results.floors),
        "plnt_rate": results.plnt_rate,
        "floor_rate": results.floor_rate,
        "ratio": results.ratio,
        "target_ratio": CREATE_RATIO_TARGET,
        "cpu": results.cpu_row().as_json(),
    }
