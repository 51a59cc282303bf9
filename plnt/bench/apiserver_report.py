"""The API server benchmark's results, and the table, ratios and JSON printed from them.

Every ratio divides plnt by the floor beneath it, measured in the same run: raw etcd
through `EtcdStore` (what plnt stores with) and a bare HTTPS handler (what plnt's HTTP
and TLS stack costs by itself). Targets print PASS or MISS; a miss is a finding to
read, never an exit status (see bench/README.md for each number).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from plnt.bench import apiserver as harness
from plnt.bench import consistent_reads, cputime, reports, wrk
from plnt.bench.settings import ApiBenchmarkSettings

GET_RAW_TARGET = 1.0
CREATE_RAW_TARGET = 0.5
GET_CPU_TARGET = 1.5
"""plnt's CPU per GET over etcd's CPU per raw get, at most."""
CREATE_CPU_TARGET = 3.0
"""plnt's CPU per CREATE over etcd's CPU per raw put, at most."""
WATCH_P99_TARGET_MS = 100.0
RSS_TARGET_MB = 200.0
SERVER, ETCD, GENERATOR, BARE = "server", "etcd", "generator", "bare"
"""The process groups whose CPU each phase records (`apiserver_running.meter`)."""
WRK_TARGETS = {("get", 1): 1.5, ("get", 16): 1.0, ("create", 16): 2.0}
"""plnt's CPU per request over etcd's HTTP gateway's, at most, by (operation, connections)."""
WRK_SIDES = {"etcd": "etcd HTTP gateway", "bare": "bare https", "plnt": "plnt api"}


@dataclass
class Results:
    """Each side's phases by name (`get`, `create`, `list`) and the watch fan-out."""

    raw: dict[str, harness.PhaseStats] = field(default_factory=dict)
    bare: dict[str, harness.PhaseStats] = field(default_factory=dict)
    api: dict[str, harness.PhaseStats] = field(default_factory=dict)
    watch: harness.WatchStats | None = None
    reads: dict[str, harness.PhaseStats] = field(default_factory=dict)
    """The `reads` phase by mode (`consistent_reads.READ_MODES`)."""
    wrk: list[wrk.WrkPhase] = field(default_factory=list)
    """The `wrk` phase's runs, an operation (`get`, `create`) on a side (`WRK_SIDES`) each
    (empty when it did not run)."""
    wrk_missing: bool = False
    """The `wrk` phase was asked for but wrk is not installed."""
    rss_started_bytes: int = 0
    """The API server's resident set before the preload (its watch cache empty)."""
    rss_loaded_bytes: int = 0
    """... and once its watch cache holds every preloaded WorkflowRun."""

    def sides(self) -> tuple[dict[str, harness.PhaseStats], ...]:
        return self.raw, self.bare, self.api


def _ratio(api: harness.PhaseStats | None, floor: harness.PhaseStats | None) -> float:
    if api is None or floor is None or floor.rate == 0:
        return 0.0
    return api.rate / floor.rate


def _median_ms(stats: harness.PhaseStats | None) -> float:
    return stats.percentile_ms(0.5) if stats is not None else 0.0


def report(results: Results, settings: ApiBenchmarkSettings) -> list[str]:
    """The printed report: one row per phase, then the ratio lines."""
    lines = [
        f"plnt API server benchmark: concurrency {settings.concurrency} "
        f"(LIST {settings.list_concurrency}), {settings.objects} objects"
        + (f" (GET the first {settings.get_objects})" if settings.get_objects else "")
        + ", "
        f"pages of {settings.page}, {settings.duration:g}s per phase, {os.cpu_count()} CPUs",
        f"{'phase':<12}{'raw etcd':>14}{'bare https':>14}{'plnt api':>14}"
        f"{'api p50 ms':>12}{'api p99 ms':>12}{'errors':>8}",
    ]
    for phase, unit in (("get", "/s"), ("create", "/s"), ("list", " lists/s")):
        api = results.api.get(phase)
        if api is None:
            continue
        cells = []
        for side in results.sides():
            stats = side.get(phase)
            cells.append(f"{stats.rate:>14.1f}" if stats else f"{'-':>14}")
        errors = sum(side[phase].errors for side in results.sides() if phase in side)
        lines.append(
            f"{phase.upper() + unit:<12}{''.join(cells)}"
            f"{api.percentile_ms(0.5):>12.2f}{api.percentile_ms(0.99):>12.2f}{errors:>8}"
        )
    if "list" in results.api:
        lines.append(
            f"LIST time per full list of {settings.objects}: "
            f"raw {_median_ms(results.raw.get('list')):.1f} ms, "
            f"api {results.api['list'].percentile_ms(0.5):.1f} ms (median)"
        )
    lines += _ratio_lines(results)
    lines += [row.line() for row in cpu_rows(results).values()]
    if results.rss_loaded_bytes:
        started, loaded = results.rss_started_bytes / 2**20, results.rss_loaded_bytes / 2**20
        lines.append(
            f"RSS api server        {loaded:6.1f} MB with {settings.objects} WorkflowRuns "
            f"cached ({started:.1f} MB before)  target <= {RSS_TARGET_MB:.0f} MB  "
            f"{reports.verdict(loaded <= RSS_TARGET_MB)}"
        )
    if results.reads:
        lines += consistent_reads.report_lines(results.reads)
    if results.wrk_missing:
        lines.append(f"MISSING {wrk.MISSING}")
    lines += wrk_lines(results.wrk)
    if results.watch is not None:
        lines += _watch_lines(results.watch, settings)
    return lines


def _ratio_lines(results: Results) -> list[str]:
    lines = []
    if "get" in results.api:
        get_raw = _ratio(results.api["get"], results.raw.get("get"))
        lines += [
            f"ratio GET api/raw     {get_raw:6.2f}  target >= {GET_RAW_TARGET:.2f}  "
            f"{reports.verdict(get_raw >= GET_RAW_TARGET)}",
            f"ratio GET api/bare    {_ratio(results.api['get'], results.bare.get('get')):6.2f}",
        ]
    if "create" in results.api:
        create_raw = _ratio(results.api["create"], results.raw.get("create"))
        lines += [
            f"ratio CREATE api/raw  {create_raw:6.2f}  target >= {CREATE_RAW_TARGET:.2f}  "
            f"{reports.verdict(create_raw >= CREATE_RAW_TARGET)}",
            f"ratio CREATE api/bare "
            f"{_ratio(results.api['create'], results.bare.get('create')):6.2f}",
        ]
    if "list" in results.api:
        lines.append(
            f"ratio LIST api/raw    {_ratio(results.api['list'], results.raw.get('list')):6.2f}"
        )
    return lines


_CPU_ROWS = (
    ("get", "GET", "etcd per raw get", GET_CPU_TARGET),
    ("create", "CREATE", "etcd per raw put", CREATE_CPU_TARGET),
    ("list", "LIST", "etcd per raw full list", None),
)


def cpu_rows(results: Results) -> dict[str, cputime.CpuRow]:
    """Per phase: the API server's CPU per request against etcd's per raw request.

    plnt's side is the server process alone; etcd's CPU during plnt's phase (it stores
    and answers plnt's requests) is printed beside it, with the bare handler's CPU per
    request (the same process, its own phase) and the load generator's on both sides.
    """
    rows = {}
    for phase, label, floor, target in _CPU_ROWS:
        api = results.api.get(phase)
        if api is None:
            continue
        raw, bare = results.raw.get(phase), results.bare.get(phase)
        beside = [("etcd during plnt's phase", api.cpu_ms(ETCD))]
        if bare is not None:
            beside.append(("bare https server", bare.cpu_ms(BARE)))
        beside.append(("generator during plnt's phase", api.cpu_ms(GENERATOR)))
        if raw is not None:
            beside.append(("generator during etcd's", raw.cpu_ms(GENERATOR)))
        rows[phase] = cputime.CpuRow(
            label,
            plnt="API server process",
            plnt_ms=api.cpu_ms(SERVER),
            floor=floor,
            floor_ms=raw.cpu_ms(ETCD) if raw is not None else None,
            target=target,
            beside=tuple(beside),
        )
    return rows


_WRK_CPU = {"etcd": ETCD, "bare": BARE, "plnt": SERVER}
"""Whose CPU a wrk run's side costs."""


def wrk_lines(phases: list[wrk.WrkPhase]) -> list[str]:
    """A row per wrk run (rate, latency, the side's CPU per request), then per operation
    and connection count plnt's CPU per request against etcd's gateway's and the bare
    handler's."""
    if not phases:
        return []
    lines = [wrk.HEADER]
    for phase in phases:
        line = wrk.row(
            f"{phase.op.upper():<6}",
            WRK_SIDES[phase.side],
            phase,
            cpu_ms=phase.cpu_ms(_WRK_CPU[phase.side]),
        )
        if phase.side == "plnt":
            line += f", etcd {wrk.ms(phase.cpu_ms(ETCD))} ms"
        lines.append(line)
    lines += [row.line() for row in wrk_cpu_rows(phases).values()]
    return lines


def wrk_cpu_rows(phases: list[wrk.WrkPhase]) -> dict[str, cputime.CpuRow]:
    """Per (operation, connections): plnt's CPU per request against etcd's HTTP gateway's
    (the same bytes stored or read by a Go server, through the same C client), with the
    bare handler's beside it."""
    found = {(p.op, p.side, p.connections): p for p in phases}
    rows = {}
    for (op, side, connections), plnt in found.items():
        if side != "plnt":
            continue
        gateway = found.get((op, "etcd", connections))
        bare = found.get((op, "bare", connections))
        key = f"{op} c={connections}"
        rows[key] = cputime.CpuRow(
            f"wrk {op.upper()} c={connections}",
            plnt="API server process",
            plnt_ms=plnt.cpu_ms(SERVER),
            floor="etcd's HTTP gateway",
            floor_ms=gateway.cpu_ms(ETCD) if gateway is not None else None,
            target=WRK_TARGETS.get((op, connections)),
            beside=(
                ("bare https", bare.cpu_ms(BARE) if bare is not None else None),
                ("etcd during plnt's", plnt.cpu_ms(ETCD)),
            ),
        )
    return rows


def _watch_lines(watch: harness.WatchStats, settings: ApiBenchmarkSettings) -> list[str]:
    def ms(values: list[float], q: float) -> float:
        return harness.percentile(values, q) * 1000

    p99 = ms(watch.delays_since_send, 0.99)
    ok = watch.all_delivered and p99 <= WATCH_P99_TARGET_MS
    return [
        f"WATCH {watch.watchers} watchers x {watch.events} creates at {settings.watch_rate:g}/s: "
        f"delivered {watch.delivered}/{watch.expected}, complete watchers "
        f"{watch.complete_watchers}/{watch.watchers}, create errors {watch.create_errors}",
        "WATCH delay since create sent: "
        f"p50 {ms(watch.delays_since_send, 0.5):.1f} ms, "
        f"p99 {p99:.1f} ms, max {max(watch.delays_since_send, default=0) * 1000:.1f} ms; "
        "since create answered: "
        f"p50 {ms(watch.delays_since_answer, 0.5):.1f} ms, "
        f"p99 {ms(watch.delays_since_answer, 0.99):.1f} ms; "
        f"create p50 {ms(watch.create_latencies, 0.5):.1f} ms",
        _watch_cpu_line(watch),
        f"ratio WATCH p99 ms    {p99:6.1f}  target <= {WATCH_P99_TARGET_MS:.0f} ms, "
        f"all delivered ({'yes' if watch.all_delivered else 'no'})  {reports.verdict(ok)}",
    ]


def _watch_cpu_line(watch: harness.WatchStats) -> str:
    """What each side spent per delivered event: a generator near a full core limits the figure."""
    events = max(watch.delivered, 1)
    elapsed = max(watch.elapsed, 1e-9)

    def side(cpu: float) -> str:
        return f"{cpu / events * 1e6:.1f} us/event ({cpu / elapsed:.0%} of a core)"

    return (
        f"WATCH CPU over {watch.elapsed:.1f} s: generator (creates and watchers) "
        f"{side(watch.generator_cpu)}, server {side(watch.server_cpu)}"
    )


def as_json(results: Results) -> dict[str, object]:
    """The results for `--json`: rate, ops, errors, p50 and p99 per side and phase."""

    def phase(stats: harness.PhaseStats) -> dict[str, object]:
        return {
            "rate": stats.rate,
            "ops": stats.ops,
            "errors": stats.errors,
            "p50_ms": stats.percentile_ms(0.5),
            "p99_ms": stats.percentile_ms(0.99),
            "cpu_ms_per_req": {name: stats.cpu_ms(name) for name in stats.cpu},
        }

    out: dict[str, object] = {
        name: {phase_name: phase(stats) for phase_name, stats in side.items()}
        for name, side in zip(("raw", "bare", "api"), results.sides(), strict=True)
    }
    out["cpu"] = {phase: row.as_json() for phase, row in cpu_rows(results).items()}
    if results.wrk:
        out["wrk"] = {
            f"{p.op} {p.side} c={p.connections}": {
                "rate": p.result.rate,
                "requests": p.result.requests,
                "errors": p.result.errors,
                "p50_ms": p.result.p50_ms,
                "p99_ms": p.result.p99_ms,
                "cpu_ms_per_req": {name: p.cpu_ms(name) for name in p.cpu},
            }
            for p in results.wrk
        }
        out["wrk_cpu"] = {key: row.as_json() for key, row in wrk_cpu_rows(results.wrk).items()}
    if results.rss_loaded_bytes:
        out["rss"] = {"started": results.rss_started_bytes, "loaded": results.rss_loaded_bytes}
    if results.reads:
        out["reads"] = {name: phase(stats) for name, stats in results.reads.items()}
    if results.watch is not None:
        w = results.watch
        out["watch"] = {
            "watchers": w.watchers,
            "events": w.events,
            "delivered": w.delivered,
            "expected": w.expected,
            "complete_watchers": w.complete_watchers,
            "p50_ms": harness.percentile(w.delays_since_send, 0.5) * 1000,
            "p99_ms": harness.percentile(w.delays_since_send, 0.99) * 1000,
            "elapsed_s": w.elapsed,
            "generator_cpu_s": w.generator_cpu,
            "server_cpu_s": w.server_cpu,
        }
    return out
