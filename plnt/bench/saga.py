"""Load phases for the deploy saga benchmark: apply → Ready latency, and invoke via the API.

Why apart from the run (`saga_running`): the phases need only the plnt HTTP API
(`plnt.client`) and plain HTTP to a runner, not the processes (Temporal, `plnt up`),
so tests import them without starting anything. Nothing here imports the sagas: a
deploy is observed the way a user observes it, through a watch on the WorkflowRun.

Deploys (create, time to Ready, delete) are in `plnt.bench.deploys`.

Invoke is measured twice in one run, with the same closed loop, the same body and
the same concurrency: through the API server (`POST …/workflowruns/{name}/invoke`
over HTTPS with the admin client certificate) and directly on the runner the API
server would pick (`POST {endpoint}/invoke`). Both clients keep connections alive.
Floors (`Floor`) are stand-ins for the API server that do less than it, measured the
same way: the report gives each one's ratio and overhead against direct, and charges
plnt's own code with what the API path costs above the last (closest) floor.

Errors: none of its own; a failed invocation counts in `PhaseStats.errors` (the phase
goes on).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from plnt.api import codec
from plnt.api.envelopes import invoke_envelope
from plnt.bench import apiserver as harness
from plnt.bench import cputime, reports
from plnt.bench.runner_starts import RunnerStarts

PhaseStats = harness.PhaseStats
INVOKE_BODY = codec.dumps(invoke_envelope({"topic": "etcd"}))
DEPLOY_TARGET_P50_S = 0.6
THROUGHPUT_TARGET = 0.7
OVERHEAD_TARGET_MS = 1.0
PLNT_UP, RUNNER, ETCD, GENERATOR = "plnt up", "runner", "etcd", "generator"
"""The process groups whose CPU each invoke phase records (`saga_running`)."""
PLNT_UP_COVERS = "plnt up process: API server and worker, not its children"


@dataclass(frozen=True, slots=True)
class InvokeSettings:
    """How long and how wide each invoke phase runs."""

    concurrency: int = 16
    duration: float = 5.0
    sequential_duration: float = 5.0
    warmup: float = 0.5


@dataclass(frozen=True, slots=True)
class Floor:
    """A stand-in for the API server's proxy that leaves parts of it out."""

    key: str  # prefix of its JSON fields
    label: str  # its rows in the table
    title: str  # its floor line
    leaves_out: str  # what it does not do that the API path does


BARE = Floor("bare", "bare proxy", "bare proxy", "plain HTTP, no TLS, no middleware")
BARE_TLS = Floor("bare_tls", "bare tls", "bare proxy over TLS", "TLS, no middleware")


@dataclass(frozen=True, slots=True)
class FloorRoute:
    """How the invoke phases reach a floor: its invoke URL and the session to use."""

    floor: Floor
    url: str
    session: aiohttp.ClientSession


@dataclass(frozen=True, slots=True)
class FloorStats:
    """A floor's two phases: at `concurrency` and sequentially."""

    floor: Floor
    wide: PhaseStats
    sequential: PhaseStats


def p50_gap_ms(slower: PhaseStats, faster: PhaseStats) -> float:
    """p50 of `slower` minus p50 of `faster`, in milliseconds."""
    return slower.percentile_ms(0.5) - faster.percentile_ms(0.5)


@dataclass(slots=True)
class InvokeResults:
    """The invoke phases: API and direct, at `concurrency` and sequentially, and the floors.

    `floors` go from the lowest (doing least) to the closest to the API path.
    """

    api: PhaseStats
    direct: PhaseStats
    api_sequential: PhaseStats
    direct_sequential: PhaseStats
    floors: list[FloorStats] = field(default_factory=list)

    def ratio_to_direct(self, wide: PhaseStats) -> float:
        """Calls/s of `wide` over direct calls/s at the same concurrency."""
        return wide.rate / self.direct.rate if self.direct.rate else 0.0

    def overhead_to_direct_ms(self, sequential: PhaseStats) -> float:
        """p50 of one call of `sequential` minus p50 of one direct call."""
        return p50_gap_ms(sequential, self.direct_sequential)

    @property
    def throughput_ratio(self) -> float:
        return self.ratio_to_direct(self.api)

    @property
    def overhead_ms(self) -> float:
        """p50 of one call through the API minus p50 of one direct call, sequentially."""
        return self.overhead_to_direct_ms(self.api_sequential)

    @property
    def concurrent_overhead_ms(self) -> float:
        return p50_gap_ms(self.api, self.direct)

    @property
    def own_share(self) -> tuple[Floor, float] | None:
        """The closest floor and the API's p50 above it at concurrency 1: plnt's own cost."""
        if not self.floors:
            return None
        closest = self.floors[-1]
        return closest.floor, p50_gap_ms(self.api_sequential, closest.sequential)

    def cpu_rows(self, concurrency: int) -> dict[str, cputime.CpuRow]:
        """`plnt up`'s CPU per invoke against the runner's per direct invoke, wide and one
        at a time; each floor's proxy's CPU per call in its own phase beside them."""
        wide = runner_cpu_row(
            f"invoke c={concurrency}",
            self.api,
            self.direct,
            plnt=(PLNT_UP, PLNT_UP_COVERS),
            target=None,
            others=(ETCD,),
            extra=[(f"{f.floor.label} per call", f.wide.cpu_ms(f.floor.key)) for f in self.floors],
        )
        one = runner_cpu_row(
            "invoke c=1",
            self.api_sequential,
            self.direct_sequential,
            plnt=(PLNT_UP, PLNT_UP_COVERS),
            target=None,
            others=(ETCD,),
            extra=[
                (f"{f.floor.label} per call", f.sequential.cpu_ms(f.floor.key)) for f in self.floors
            ],
        )
        return {"wide": wide, "sequential": one}


@dataclass(slots=True)
class SagaResults:
    """Everything one benchmark run measured."""

    deploy_seconds: list[float] = field(default_factory=list)
    runner_starts: RunnerStarts | None = None
    """The floor under a deploy: runner starts, executed and forked (`runner_starts`)."""
    invoke: InvokeResults | None = None
    endpoint: str = ""
    evaluation_ms: list[float] = field(default_factory=list)
    """Per deploy with a quality gate: the evaluate step's own time (its record's)."""
    evaluation_cases: int = 0


def evaluation_milliseconds(obj: Mapping[str, Any]) -> float | None:
    """How long a Ready run's quality gate took (`status.lastEvaluation`), if it had one."""
    record = (obj.get("status") or {}).get("lastEvaluation") or {}
    value = record.get("durationMilliseconds")
    return float(value) if isinstance(value, int | float) else None


# -- invocations --------------------------------------------------------------------------


def invoke_operation(
    session: aiohttp.ClientSession, url: str, body: bytes = INVOKE_BODY
) -> Callable[[int], Awaitable[bool]]:
    """One POST of `body` to `url`; True for a 200 whose body was read completely."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    async def operation(seq: int) -> bool:
        del seq
        try:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    return operation


async def measure(
    operation: Callable[[int], Awaitable[bool]],
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    meter: cputime.Meter | None = None,
) -> PhaseStats:
    """A warm-up (discarded), then `duration` seconds of closed loop; at least one call.
    `meter`'s CPU readings cover the closed loop only."""
    if warmup > 0:
        await harness.run_closed_loop(operation, concurrency=concurrency, duration=warmup)
    return await harness.run_closed_loop(
        operation, concurrency=concurrency, duration=duration, min_ops=1, meter=meter
    )


def runner_cpu_row(
    label: str,
    through: PhaseStats,
    direct: PhaseStats,
    *,
    plnt: tuple[str, str],
    target: float | None,
    others: Sequence[str] = (),
    extra: Sequence[tuple[str, float | None]] = (),
) -> cputime.CpuRow:
    """plnt's CPU per call through it (group `plnt[0]`, described as `plnt[1]`) against
    the runner's CPU per direct call. Beside them: the runner's CPU during plnt's phase
    (it answers plnt's calls too), each of `others` during plnt's phase, and the
    generator's on both sides, then `extra`."""
    group, described = plnt
    beside = [("runner during plnt's phase", through.cpu_ms(RUNNER))]
    beside += [(f"{name} during plnt's phase", through.cpu_ms(name)) for name in others]
    beside += [
        ("generator during plnt's phase", through.cpu_ms(GENERATOR)),
        ("generator during direct", direct.cpu_ms(GENERATOR)),
        *extra,
    ]
    return cputime.CpuRow(
        label,
        plnt=described,
        plnt_ms=through.cpu_ms(group),
        floor="runner per direct call",
        floor_ms=direct.cpu_ms(RUNNER),
        target=target,
        beside=tuple(beside),
    )


async def invoke_phases(
    api: aiohttp.ClientSession,
    direct: aiohttp.ClientSession,
    *,
    api_url: str,
    direct_url: str,
    settings: InvokeSettings,
    floors: Sequence[FloorRoute] = (),
    meter: cputime.Meter | None = None,
) -> InvokeResults:
    """Through the API, directly, then through each floor; wide and then one at a time.
    With a `meter`, each phase records the CPU its groups used."""

    async def run(operation: Callable[[int], Awaitable[bool]], *, wide: bool) -> PhaseStats:
        return await measure(
            operation,
            concurrency=settings.concurrency if wide else 1,
            duration=settings.duration if wide else settings.sequential_duration,
            warmup=settings.warmup,
            meter=meter,
        )

    through, straight = invoke_operation(api, api_url), invoke_operation(direct, direct_url)
    results = InvokeResults(
        api=await run(through, wide=True),
        direct=await run(straight, wide=True),
        api_sequential=await run(through, wide=False),
        direct_sequential=await run(straight, wide=False),
    )
    for route in floors:
        operation = invoke_operation(route.session, route.url)
        wide = await run(operation, wide=True)
        results.floors.append(FloorStats(route.floor, wide, await run(operation, wide=False)))
    return results


def http_session(*, pool: int) -> aiohttp.ClientSession:
    """A plain-HTTP keep-alive session for the runner (`pool` connections)."""
    connector = aiohttp.TCPConnector(limit=pool, limit_per_host=pool)
    timeout = aiohttp.ClientTimeout(total=60, sock_connect=30)
    return aiohttp.ClientSession(connector=connector, timeout=timeout)


# -- the report ---------------------------------------------------------------------------


def _seconds(values: Sequence[float], q: float) -> float:
    return harness.percentile(values, q)


def _runner_start_lines(starts: RunnerStarts | None, deploy_p50: float) -> list[str]:
    """The floor rows under apply → Ready, and what the saga adds above a forked start."""
    if starts is None or not starts.executed or not starts.forked:
        return []
    lines = []
    for label, values in (
        ("runner start executed", starts.executed),
        ("runner start forked", starts.forked),
    ):
        lines.append(
            f"{label:<22}{_seconds(values, 0.5):>10.3f}{_seconds(values, 0.95):>10.3f}"
            f"{max(values):>10.3f}{values[0]:>10.3f}"
        )
    executed, forked = _seconds(starts.executed, 0.5), _seconds(starts.forked, 0.5)
    lines += [
        f"floor: forked/executed runner start p50 {forked / executed if executed else 0.0:5.2f}",
        f"saga's own share p50: apply -> Ready - forked runner start = {deploy_p50 - forked:.3f} s",
    ]
    return lines


def _evaluation_lines(results: SagaResults) -> list[str]:
    """The quality gate's share of each deploy: in total, and per case."""
    gate, cases = results.evaluation_ms, results.evaluation_cases
    if not gate or not cases:
        return []
    p50 = _seconds(gate, 0.5)
    return [
        f"quality gate ({cases} cases, canary only: a first deploy)"
        f"  p50 {p50:.1f} ms  p95 {_seconds(gate, 0.95):.1f} ms"
        f"  per case p50 {p50 / cases:.2f} ms"
    ]


def report(results: SagaResults, settings: InvokeSettings) -> list[str]:
    """The human-readable table."""
    lines: list[str] = []
    deploys = results.deploy_seconds
    if deploys:
        p50 = _seconds(deploys, 0.5)
        lines += [
            f"deploy saga benchmark: {len(deploys)} deploys (apply → Ready)",
            f"{'':<22}{'p50 s':>10}{'p95 s':>10}{'max s':>10}{'first s':>10}",
            f"{'apply -> Ready':<22}{p50:>10.3f}{_seconds(deploys, 0.95):>10.3f}"
            f"{max(deploys):>10.3f}{deploys[0]:>10.3f}",
            f"target deploy p50      {p50:6.3f} s  target <= {DEPLOY_TARGET_P50_S:g} s  "
            f"{reports.verdict(p50 <= DEPLOY_TARGET_P50_S)}",
        ]
        lines += _runner_start_lines(results.runner_starts, p50)
        lines += _evaluation_lines(results)
    invoke = results.invoke
    if invoke is not None:
        lines += [
            f"invoke: concurrency {settings.concurrency} for {settings.duration:g} s, "
            f"then 1 for {settings.sequential_duration:g} s; runner {results.endpoint}",
            reports.phase_header(22),
        ]
        wide = [("api", invoke.api), ("direct", invoke.direct)]
        wide += [(stats.floor.label, stats.wide) for stats in invoke.floors]
        one = [("api", invoke.api_sequential), ("direct", invoke.direct_sequential)]
        one += [(stats.floor.label, stats.sequential) for stats in invoke.floors]
        for suffix, group in ((f"c={settings.concurrency}", wide), ("c=1", one)):
            for name, stats in group:
                lines.append(reports.phase_row(f"{name} {suffix}", stats, width=22))
        ratio, overhead = invoke.throughput_ratio, invoke.overhead_ms
        lines += [
            f"ratio invoke api/direct {ratio:6.2f}  target >= {THROUGHPUT_TARGET:.2f}  "
            f"{reports.verdict(ratio >= THROUGHPUT_TARGET)}",
            f"overhead p50 c=1        {overhead:6.2f} ms  target <= {OVERHEAD_TARGET_MS:g} ms  "
            f"{reports.verdict(overhead <= OVERHEAD_TARGET_MS)}",
            f"overhead p50 c={settings.concurrency:<8} {invoke.concurrent_overhead_ms:6.2f} ms",
        ]
        for floor in invoke.floors:
            lines.append(
                f"floor: {floor.floor.title}/direct {invoke.ratio_to_direct(floor.wide):5.2f}, "
                f"overhead p50 c=1 {invoke.overhead_to_direct_ms(floor.sequential):5.2f} ms "
                f"({floor.floor.leaves_out})"
            )
        if invoke.own_share is not None:
            closest, share = invoke.own_share
            lines.append(f"plnt's own share p50 c=1: api - {closest.label} = {share:.2f} ms")
        lines += [row.line() for row in invoke.cpu_rows(settings.concurrency).values()]
    return lines


def as_json(results: SagaResults, settings: InvokeSettings) -> dict[str, Any]:
    """The results as one JSON object (`saga_command` prints it as its last line)."""

    deploys = results.deploy_seconds
    out: dict[str, Any] = {
        "deploy": {
            "count": len(deploys),
            "p50_s": _seconds(deploys, 0.5),
            "p95_s": _seconds(deploys, 0.95),
            "max_s": max(deploys, default=0.0),
            "first_s": deploys[0] if deploys else 0.0,
            "target_p50_s": DEPLOY_TARGET_P50_S,
        }
    }
    if results.evaluation_ms and results.evaluation_cases:
        gate = results.evaluation_ms
        out["evaluation"] = {
            "cases": results.evaluation_cases,
            "p50_ms": _seconds(gate, 0.5),
            "p95_ms": _seconds(gate, 0.95),
            "per_case_p50_ms": _seconds(gate, 0.5) / results.evaluation_cases,
        }
    starts = results.runner_starts
    if starts is not None and starts.executed and starts.forked:
        out["runner_start"] = {
            way: {
                "count": len(values),
                "p50_s": _seconds(values, 0.5),
                "p95_s": _seconds(values, 0.95),
                "max_s": max(values),
            }
            for way, values in (("executed", starts.executed), ("forked", starts.forked))
        }
        out["deploy"]["saga_share_p50_s"] = (
            out["deploy"]["p50_s"] - out["runner_start"]["forked"]["p50_s"]
        )
    invoke = results.invoke
    if invoke is not None:
        out["invoke"] = {
            "concurrency": settings.concurrency,
            "duration_s": settings.duration,
            "api": reports.phase_json(invoke.api),
            "direct": reports.phase_json(invoke.direct),
            "api_sequential": reports.phase_json(invoke.api_sequential),
            "direct_sequential": reports.phase_json(invoke.direct_sequential),
            "throughput_ratio": invoke.throughput_ratio,
            "overhead_p50_ms": invoke.overhead_ms,
            "concurrent_overhead_p50_ms": invoke.concurrent_overhead_ms,
            "target_throughput_ratio": THROUGHPUT_TARGET,
            "target_overhead_ms": OVERHEAD_TARGET_MS,
        }
        for stats in invoke.floors:
            key = stats.floor.key
            out["invoke"].update(
                {
                    key: reports.phase_json(stats.wide),
                    f"{key}_sequential": reports.phase_json(stats.sequential),
                    f"{key}_throughput_ratio": invoke.ratio_to_direct(stats.wide),
                    f"{key}_overhead_p50_ms": invoke.overhead_to_direct_ms(stats.sequential),
                }
            )
        if invoke.own_share is not None:
            closest, share = invoke.own_share
            out["invoke"].update(own_share_floor=closest.key, own_share_p50_ms=share)
        rows = invoke.cpu_rows(settings.concurrency)
        out["invoke"]["cpu"] = {key: row.as_json() for key, row in rows.items()}
    return out
