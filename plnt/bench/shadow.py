"""`python -m plnt.bench shadow`: what shadow traffic costs a caller of `…/proxy/invoke`.

    python -m plnt.bench shadow [--shadow-percents 0,50,100] [--concurrency 4]
                                [--duration 5] [--warmup 0.5] [--latency-ms 0]
                                [--canary-latency-ms 0] [--json FILE]

One run starts etcd, the API server child (`apiserver_serving`: watch cache, HTTPS with
plnt's PKI) and two runner processes of `examples/chat.workflow.yaml` on the echo backend,
creates a WorkflowRun and, playing the saga's part through the status subresource, makes
the first runner its stable revision (weight 100) and the second its canary (weight 0).
Then, for each percent in `--shadow-percents` in the order given, it writes the canary's
shadow window (`shadow: {percent}`; none for 0), waits until a mirrored pair shows under
`…/shadow` (for a percent above 0), measures a closed loop of invocations at
`--concurrency` for `--duration` seconds, and waits for the mirrored calls still queued to
finish (two equal reads of `…/shadow`) before the next percent starts.

Every call asks a different question, so the runners' step caches never answer. The
report is the caller's p50 and p99 per percent and their ratios to the 0 % row (the
first 0 % measured; without one, to the first row), the calls dropped from the full
mirroring queue, and the pairs the API server kept (at most its last 200 per run). The
numbers are ratios taken in one run on one machine, never asserted. Errors: `BenchmarkError`
(a child did not start, the API refused a write, no pair came for an open window).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from plnt.api import shadows as wire
from plnt.api.envelopes import invoke_envelope
from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_running, proxy, reports
from plnt.bench.saga import measure
from plnt.processes.etcd import EtcdProcess

STABLE, CANARY = 1, 2
DIGEST = "sha256:" + "ab" * 32
WINDOW_DEADLINE_SECONDS = 30.0
POLL_SECONDS = 0.1
PhaseStats = harness.PhaseStats


@dataclass(frozen=True, slots=True)
class ShadowSettings:
    percents: tuple[int, ...] = (0, 50, 100)
    concurrency: int = 4
    duration: float = 5.0
    warmup: float = 0.5
    latency_ms: float = 0.0
    canary_latency_ms: float = 0.0
    queue_size: int = 64


@dataclass
class ShadowRow:
    """One percent: the callers' calls, and what the API server mirrored meanwhile."""

    percent: int
    calls: PhaseStats = field(default_factory=PhaseStats)
    dropped: int = 0
    pairs: int = 0
    """New pairs in the API server's answer after the phase (it keeps its last 200, so
    200 means at least 200; the report prints `200+`)."""


@dataclass
class ShadowResults:
    rows: list[ShadowRow] = field(default_factory=list)

    @property
    def baseline(self) -> ShadowRow | None:
        """The row the ratios are taken to: the first 0 %, else the first row."""
        for row in self.rows:
            if row.percent == 0:
                return row
        return self.rows[0] if self.rows else None

    def ratios(self, row: ShadowRow) -> tuple[float, float]:
        """(p50, p99) of `row` over the baseline's; 0.0 where the baseline has none."""
        base = self.baseline
        if base is None:
            return 0.0, 0.0
        found: list[float] = []
        for q in (0.5, 0.99):
            under = base.calls.percentile_ms(q)
            found.append(row.calls.percentile_ms(q) / under if under else 0.0)
        return found[0], found[1]


def traffic(stable: str, canary: str, *, percent: int, queue_size: int) -> list[dict[str, Any]]:
    """The run's `status.traffic`: the stable takes every call; the canary, maybe, a shadow."""
    canary_entry: dict[str, Any] = {
        "revision": CANARY,
        "digest": DIGEST,
        "weight": 0,
        "endpoints": [canary],
    }
    if percent > 0:
        canary_entry["shadow"] = {"percent": percent, "queueSize": queue_size}
    stable_entry = {"revision": STABLE, "digest": DIGEST, "weight": 100, "endpoints": [stable]}
    return [stable_entry, canary_entry]


async def write_traffic(
    session: aiohttp.ClientSession, base: str, entries: list[dict[str, Any]]
) -> None:
    """Merge-patch the run's status with `entries` as its traffic, as the saga would."""
    url = f"{base}{harness.resource_path(proxy.NAMESPACE, proxy.NAME)}/status"
    status = {"status": {"revision": STABLE, "traffic": entries}}
    async with session.patch(
        url, json=status, headers={"Content-Type": "application/merge-patch+json"}
    ) as response:
        if response.status != 200:
            raise harness.BenchmarkError(f"traffic: {response.status} {await response.text()}")


async def read_shadow(session: aiohttp.ClientSession, base: str) -> tuple[list[str], int]:
    """The ids of the pairs the API server keeps for the canary, and its drops."""
    url = f"{base}{harness.resource_path(proxy.NAMESPACE, proxy.NAME)}/shadow"
    async with session.get(url, params={"revision": str(CANARY)}) as response:
        if response.status != 200:
            raise harness.BenchmarkError(f"shadow: {response.status} {await response.text()}")
        body = await response.json()
    return [str(pair["id"]) for pair in body.get("items") or []], int(body.get("dropped") or 0)


def invoke_operation(
    session: aiohttp.ClientSession, url: str, questions: Iterator[int]
) -> Callable[[int], Awaitable[bool]]:
    """One invocation with a question never asked before; True for a 200 read whole."""

    async def operation(seq: int) -> bool:
        del seq  # `questions` numbers every call of the run, so no cache answers
        body = json.dumps(invoke_envelope({"question": f"question {next(questions)}"})).encode()
        try:
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                await response.read()
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    return operation


async def _until(check: Callable[[], Awaitable[bool]], *, what: str) -> None:
    """Poll `check` until it holds, or raise BenchmarkError at the deadline."""
    deadline = time.monotonic() + WINDOW_DEADLINE_SECONDS
    while not await check():
        if time.monotonic() >= deadline:
            raise harness.BenchmarkError(f"{what} within {WINDOW_DEADLINE_SECONDS:.0f} s")
        await asyncio.sleep(POLL_SECONDS)  # polling a condition, with the deadline above


async def window_opened(
    session: aiohttp.ClientSession, base: str, call: Callable[[int], Awaitable[bool]]
) -> None:
    """Call until a new pair shows: the API server mirrors under the window just written."""
    seen = set((await read_shadow(session, base))[0])

    async def mirrored() -> bool:
        await call(0)
        return any(pair not in seen for pair in (await read_shadow(session, base))[0])

    await _until(mirrored, what="no mirrored pair showed")


async def drained(session: aiohttp.ClientSession, base: str) -> tuple[list[str], int]:
    """Read `…/shadow` until two reads agree: the mirrored calls still queued finished."""
    last = await read_shadow(session, base)

    async def same() -> bool:
        nonlocal last
        await asyncio.sleep(POLL_SECONDS)  # the interval between the two reads compared
        now = await read_shadow(session, base)
        agreed = now == last
        last = now
        return agreed

    await _until(same, what="the mirrored calls did not finish")
    return last


async def bench(settings: ShadowSettings, workdir: Path) -> ShadowResults:
    """Start etcd, the server and two runners; measure callers at each shadow percent."""
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    async with (
        EtcdProcess(workdir / "etcd", unsafe_no_fsync=True) as etcd,
        apiserver_running.running_server(etcd, workdir / "pki", cprofile=None) as server,
        proxy.running_runner(settings.latency_ms) as (stable, _),
        proxy.running_runner(settings.canary_latency_ms) as (canary, _),
        harness.https_session(context, pool=settings.concurrency + 1) as api,
    ):
        await proxy.publish(api, server.base, stable)
        run = harness.resource_path(proxy.NAMESPACE, proxy.NAME)
        call = invoke_operation(api, f"{server.base}{run}/proxy/invoke", itertools.count())
        results = ShadowResults()
        seen, dropped = await read_shadow(api, server.base)
        for percent in settings.percents:
            entries = traffic(stable, canary, percent=percent, queue_size=settings.queue_size)
            await write_traffic(api, server.base, entries)
            if percent > 0:
                await window_opened(api, server.base, call)
            row = ShadowRow(percent)
            row.calls = await measure(
                call,
                concurrency=settings.concurrency,
                duration=settings.duration,
                warmup=settings.warmup,
            )
            ids, now_dropped = await drained(api, server.base)
            row.pairs = len(set(ids) - set(seen))
            row.dropped = now_dropped - dropped
            seen, dropped = ids, now_dropped
            results.rows.append(row)
        return results


def report(results: ShadowResults, settings: ShadowSettings) -> list[str]:
    """One line per percent: the caller's p50 and p99, their ratios to the 0 % row."""
    lines = [
        f"shadow c={settings.concurrency} {settings.duration:g} s per percent"
        f" (canary latency {settings.canary_latency_ms:g} ms)"
    ]
    for row in results.rows:
        p50_ratio, p99_ratio = results.ratios(row)
        kept = "+" if row.pairs >= wire.PAIRS_KEPT else ""  # the server keeps only its last
        lines.append(
            f"shadow {row.percent:3d}%: p50 {row.calls.percentile_ms(0.5):.2f} ms"
            f" (x{p50_ratio:.2f}), p99 {row.calls.percentile_ms(0.99):.2f} ms (x{p99_ratio:.2f}),"
            f" {row.calls.rate:.1f}/s, errors {row.calls.errors},"
            f" pairs {row.pairs}{kept}, dropped {row.dropped}"
        )
    return lines


def as_json(results: ShadowResults, settings: ShadowSettings) -> dict[str, Any]:
    rows = []
    for row in results.rows:
        p50_ratio, p99_ratio = results.ratios(row)
        rows.append(
            {
                "percent": row.percent,
                "ops": row.calls.ops,
                "errors": row.calls.errors,
                "rate": row.calls.rate,
                "p50Ms": row.calls.percentile_ms(0.5),
                "p99Ms": row.calls.percentile_ms(0.99),
                "p50Ratio": p50_ratio,
                "p99Ratio": p99_ratio,
                "pairs": row.pairs,
                "dropped": row.dropped,
            }
        )
    return {"settings": dataclasses.asdict(settings), "rows": rows}


def _percents(text: str) -> tuple[int, ...]:
    try:
        found = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from error
    if not found or any(not 0 <= p <= 100 for p in found):
        raise argparse.ArgumentTypeError(f"percents from 0 to 100, comma-separated: {text!r}")
    return found


def parse_args(argv: Sequence[str] | None = None) -> tuple[ShadowSettings, Path | None]:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench shadow", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--shadow-percents", type=_percents, default=(0, 50, 100))
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per percent")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds before each percent")
    p.add_argument("--latency-ms", type=float, default=0.0, help="the stable's echo delay")
    p.add_argument("--canary-latency-ms", type=float, default=0.0, help="the canary's")
    p.add_argument("--queue-size", type=int, default=64, help="the window's queueSize")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    args = p.parse_args(argv)
    settings = ShadowSettings(
        percents=args.shadow_percents,
        concurrency=args.concurrency,
        duration=args.duration,
        warmup=args.warmup,
        latency_ms=args.latency_ms,
        canary_latency_ms=args.canary_latency_ms,
        queue_size=args.queue_size,
    )
    return settings, args.json


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plnt-bench-shadow-") as workdir:
        results = asyncio.run(bench(settings, Path(workdir)))
    reports.write(report(results, settings), as_json(results, settings), json_path)
    return 0
