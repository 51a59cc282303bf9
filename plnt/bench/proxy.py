"""`python -m plnt.bench proxy`: the OpenAI endpoint through the API server vs the runner itself.

    python -m plnt.bench proxy [--concurrency 16] [--duration 5] [--sequential-duration 3]
                               [--warmup 0.5] [--latency-ms 0] [--wrk-connections 1,16]
                               [--no-wrk] [--json FILE]

One run starts etcd, the API server child (`apiserver_serving`, as the API benchmark does:
watch cache, HTTPS with plnt's PKI) and one runner process of `examples/chat.workflow.yaml`
on the echo backend, creates a WorkflowRun and publishes the runner as its only traffic
target (playing the saga's part through the status subresource). Then, with the same
closed loop, the same bodies and keep-alive connections on both sides, it measures:

* chat completions (`POST …/proxy/v1/chat/completions` over HTTPS with the admin client
  certificate, and `POST {runner}/v1/chat/completions` over plain HTTP): throughput at
  `--concurrency` (the ratio proxy/direct; target ≥ 0.7) and the p50 at concurrency 1 (the
  overhead, proxy minus direct; target ≤ 1 ms);
* time to first token of a streamed completion (`stream: true`), at concurrency 1: from
  sending the request to the first SSE event carrying content (the p50 overhead; target
  ≤ 1 ms);
* CPU per request, for each of those phases (`cputime`, from /proc): the API server
  process's per proxied call against the runner's per direct call (target ratio ≤ 1), with the
  runner's and etcd's CPU during the proxied phase and the generator's printed beside;
* the same chats sent by `wrk`, a C client (`plnt.bench.proxy_wrk`), at each of
  `--wrk-connections`: rate, p50/p99 and CPU per request of both sides and their ratio.
  Without wrk the report prints `MISSING …` and the other phases run.

Every request asks a different question (its sequence number), so the runner's step cache
never answers and the echo backend is called each time. The numbers are ratios and
differences taken in one run on one machine, never asserted. Misses are printed, never
turned into a non-zero exit status. Errors: `BenchmarkError` (a child did not start).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_running, children, cputime, proxy_wrk, reports, wrk
from plnt.bench.saga import (
    GENERATOR,
    OVERHEAD_TARGET_MS,
    RUNNER,
    THROUGHPUT_TARGET,
    http_session,
    measure,
    runner_cpu_row,
)
from plnt.bench.settings import counts
from plnt.processes.etcd import EtcdProcess

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "examples" / "chat.workflow.yaml"
NAMESPACE = "bench-proxy"
NAME = "chat"
PhaseStats = harness.PhaseStats
CPU_TARGET = 1.0
"""The API server's CPU per proxied chat over the runner's per direct chat, at most."""
SERVER, ETCD = "server", "etcd"


@dataclass(frozen=True, slots=True)
class ProxySettings:
    concurrency: int = 16
    duration: float = 5.0
    sequential_duration: float = 3.0
    warmup: float = 0.5
    latency_ms: float = 0.0
    api_processes: tuple[int, ...] = (1,)
    """API server process counts (`--workers 1,2`): the whole benchmark runs once per count."""
    wrk_connections: tuple[int, ...] = (1, 16)
    """The wrk phase's connection counts; empty skips the phase."""


API_PROCESSES_TARGET = 1.5
"""Proxied chats/s two API server processes should reach against one."""


@dataclass
class ProxyResults:
    proxy: PhaseStats = field(default_factory=PhaseStats)
    direct: PhaseStats = field(default_factory=PhaseStats)
    proxy_sequential: PhaseStats = field(default_factory=PhaseStats)
    direct_sequential: PhaseStats = field(default_factory=PhaseStats)
    proxy_ttft: list[float] = field(default_factory=list)
    direct_ttft: list[float] = field(default_factory=list)
    proxy_stream: PhaseStats = field(default_factory=PhaseStats)
    """The streamed phases as a whole (their CPU readings); the TTFTs are above."""
    direct_stream: PhaseStats = field(default_factory=PhaseStats)
    wrk: list[wrk.WrkPhase] = field(default_factory=list)
    """The wrk phase's runs (empty when it did not run)."""
    wrk_missing: bool = False
    """The wrk phase was asked for but wrk is not installed."""

    @property
    def throughput_ratio(self) -> float:
        return self.proxy.rate / self.direct.rate if self.direct.rate else 0.0

    @property
    def overhead_ms(self) -> float:
        return self.proxy_sequential.percentile_ms(0.5) - self.direct_sequential.percentile_ms(0.5)

    @property
    def ttft_overhead_ms(self) -> float:
        return _p50_ms(self.proxy_ttft) - _p50_ms(self.direct_ttft)

    def cpu_rows(self, concurrency: int) -> dict[str, cputime.CpuRow]:
        """Per phase pair: the API server's CPU per proxied chat against the runner's."""
        pairs = {
            "chat": (f"chat c={concurrency}", self.proxy, self.direct),
            "chatSequential": ("chat c=1", self.proxy_sequential, self.direct_sequential),
            "stream": ("stream c=1", self.proxy_stream, self.direct_stream),
        }
        return {
            key: runner_cpu_row(
                label,
                through,
                direct,
                plnt=(SERVER, "API server process"),
                target=CPU_TARGET,
                others=(ETCD,),
            )
            for key, (label, through, direct) in pairs.items()
        }


def _p50_ms(seconds: Sequence[float]) -> float:
    return harness.percentile(sorted(seconds), 0.5) * 1000.0


def _body(seq: int, *, stream: bool) -> bytes:
    request: dict[str, Any] = {
        "model": "chat",
        "messages": [{"role": "user", "content": f"question {seq}"}],
    }
    if stream:
        request["stream"] = True
    return json.dumps(request).encode()


def chat_operation(
    session: aiohttp.ClientSession, url: str, questions: Iterator[int]
) -> Callable[[int], Awaitable[bool]]:
    """One chat completion; True for a 200 whose body was read completely."""

    async def operation(seq: int) -> bool:
        del seq  # `questions` numbers every request of the run, so none repeats
        body = _body(next(questions), stream=False)
        try:
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                await response.read()
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    return operation


def first_token_operation(
    session: aiohttp.ClientSession, url: str, questions: Iterator[int], into: list[float]
) -> Callable[[int], Awaitable[bool]]:
    """One streamed completion; appends the time to its first content event to `into`."""

    async def operation(seq: int) -> bool:
        del seq
        body = _body(next(questions), stream=True)
        began = time.perf_counter()
        first: float | None = None
        try:
            async with session.post(
                url, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                async for line in response.content:
                    if first is None and line.startswith(b"data:") and b'"content"' in line:
                        first = time.perf_counter() - began
                ok = response.status == 200 and first is not None
        except (aiohttp.ClientError, TimeoutError):
            return False
        if ok and first is not None:
            into.append(first)
        return ok

    return operation


@contextlib.asynccontextmanager
async def running_runner(latency_ms: float) -> AsyncIterator[tuple[str, int]]:
    """A runner process of the chat example on the echo backend; yields its base URL and
    pid."""
    echo = ("--backend-type", "echo", "--latency-ms", str(latency_ms))
    async with children.running_runner(SPEC, *echo) as child:
        yield child.url, child.process.pid


async def publish(
    session: aiohttp.ClientSession,
    base: str,
    runner: str,
    *,
    namespace: str = NAMESPACE,
    name: str = NAME,
) -> None:
    """Create the run (`namespace`/`name`, with its namespace) and make `runner` its only
    traffic target, as the saga would."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    async with session.post(f"{base}/api/v1/namespaces", json=body) as response:
        if response.status not in (201, 409):
            raise harness.BenchmarkError(f"namespace: {response.status} {await response.text()}")
    collection = base + harness.resource_path(namespace)
    run = harness.workflowrun(name)
    async with session.post(collection, json=run) as response:
        if response.status != 201:
            raise harness.BenchmarkError(
                f"create {name}: {response.status} {await response.text()}"
            )
    status = {
        "status": {
            "revision": 1,
            "traffic": [
                {
                    "revision": 1,
                    "digest": "sha256:" + "ab" * 32,
                    "weight": 100,
                    "endpoints": [runner],
                }
            ],
        }
    }
    async with session.patch(
        f"{collection}/{name}/status",
        json=status,
        headers={"Content-Type": "application/merge-patch+json"},
    ) as response:
        if response.status != 200:
            raise harness.BenchmarkError(
                f"status {name}: {response.status} {await response.text()}"
            )


async def bench(settings: ProxySettings, workdir: Path, *, api_processes: int = 1) -> ProxyResults:
    """Start etcd, the server (on `api_processes` processes) and a runner; measure proxy and
    direct, wide then one by one."""
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    pool = settings.concurrency
    async with (
        EtcdProcess(workdir / "etcd", unsafe_no_fsync=True) as etcd,
        apiserver_running.running_server(
            etcd, workdir / "pki", cprofile=None, api_processes=api_processes
        ) as server,
        running_runner(settings.latency_ms) as (runner, runner_pid),
        harness.https_session(context, pool=pool) as api,
        http_session(pool=pool) as direct,
    ):
        meter = cputime.Meter(
            [
                cputime.Watched(SERVER, server.child.process.pid, tree=True),  # + its siblings
                cputime.Watched(RUNNER, runner_pid),
                cputime.Watched(ETCD, etcd.pid),
                cputime.Watched(GENERATOR, os.getpid()),
            ]
        )
        await publish(api, server.base, runner)
        proxy_base = (
            f"{server.base}/apis/plnt.work/v1/namespaces/{NAMESPACE}/workflowruns/{NAME}/proxy"
        )
        questions = itertools.count()  # one counter: no question is asked twice
        proxy_url, direct_url = f"{proxy_base}/v1/chat/completions", f"{runner}/v1/chat/completions"
        through = chat_operation(api, proxy_url, questions)
        straight = chat_operation(direct, direct_url, questions)
        results = ProxyResults()

        async def run(operation: Callable[[int], Awaitable[bool]], *, wide: bool) -> PhaseStats:
            return await measure(
                operation,
                concurrency=settings.concurrency if wide else 1,
                duration=settings.duration if wide else settings.sequential_duration,
                warmup=settings.warmup,
                meter=meter,
            )

        results.proxy = await run(through, wide=True)
        results.direct = await run(straight, wide=True)
        results.proxy_sequential = await run(through, wide=False)
        results.direct_sequential = await run(straight, wide=False)

        async def first_tokens(
            session: aiohttp.ClientSession, url: str
        ) -> tuple[list[float], PhaseStats]:
            warm = first_token_operation(session, url, questions, [])
            await harness.run_closed_loop(warm, concurrency=1, duration=settings.warmup)
            samples: list[float] = []
            measured = first_token_operation(session, url, questions, samples)
            stats = await harness.run_closed_loop(
                measured,
                concurrency=1,
                duration=settings.sequential_duration,
                min_ops=1,
                meter=meter,
            )
            return samples, stats

        results.proxy_ttft, results.proxy_stream = await first_tokens(api, proxy_url)
        results.direct_ttft, results.direct_stream = await first_tokens(direct, direct_url)
        if settings.wrk_connections and wrk.binary() is None:
            results.wrk_missing = True
        elif settings.wrk_connections:
            results.wrk = await proxy_wrk.measure(
                proxy_url=proxy_url,
                direct_url=direct_url,
                token=server.token,
                connections=settings.wrk_connections,
                duration=settings.duration,
                warmup=settings.warmup,
                meter=meter,
                workdir=workdir,
            )
        return results


def report(results: ProxyResults, settings: ProxySettings) -> list[str]:
    """The printed lines: one per target, each a ratio or a difference."""
    p50 = PhaseStats.percentile_ms
    lines = [
        f"chat proxy  c={settings.concurrency}: {results.proxy.rate:8.1f}/s "
        f"(p50 {p50(results.proxy, 0.5):.2f} ms, errors {results.proxy.errors})",
        f"chat direct c={settings.concurrency}: {results.direct.rate:8.1f}/s "
        f"(p50 {p50(results.direct, 0.5):.2f} ms, errors {results.direct.errors})",
        f"chat c=1 p50: proxy {p50(results.proxy_sequential, 0.5):.3f} ms, "
        f"direct {p50(results.direct_sequential, 0.5):.3f} ms",
        f"ttft c=1 p50: proxy {_p50_ms(results.proxy_ttft):.3f} ms "
        f"({len(results.proxy_ttft)} streams), direct {_p50_ms(results.direct_ttft):.3f} ms "
        f"({len(results.direct_ttft)} streams)",
        f"ratio chat throughput proxy/direct {results.throughput_ratio:.2f} "
        f"(target >= {THROUGHPUT_TARGET}) "
        f"{reports.verdict(results.throughput_ratio >= THROUGHPUT_TARGET)}",
        f"overhead chat p50 c=1 {results.overhead_ms:.3f} ms "
        f"(target <= {OVERHEAD_TARGET_MS} ms) "
        f"{reports.verdict(results.overhead_ms <= OVERHEAD_TARGET_MS)}",
        f"overhead ttft p50 c=1 {results.ttft_overhead_ms:.3f} ms "
        f"(target <= {OVERHEAD_TARGET_MS} ms) "
        f"{reports.verdict(results.ttft_overhead_ms <= OVERHEAD_TARGET_MS)}",
    ]
    lines += [row.line() for row in results.cpu_rows(settings.concurrency).values()]
    if results.wrk_missing:
        lines.append(f"MISSING {wrk.MISSING}")
    lines += proxy_wrk.lines(results.wrk)
    return lines


def as_json(results: ProxyResults, settings: ProxySettings) -> dict[str, Any]:
    def phase(stats: PhaseStats) -> dict[str, object]:
        return {
            "rate": stats.rate,
            "p50Ms": stats.percentile_ms(0.5),
            "p99Ms": stats.percentile_ms(0.99),
            "ops": stats.ops,
            "errors": stats.errors,
            "cpuMsPerRequest": {name: stats.cpu_ms(name) for name in stats.cpu},
        }

    return {
        "settings": dataclasses.asdict(settings),
        "proxy": phase(results.proxy),
        "direct": phase(results.direct),
        "proxySequential": phase(results.proxy_sequential),
        "directSequential": phase(results.direct_sequential),
        "ttftP50Ms": {"proxy": _p50_ms(results.proxy_ttft), "direct": _p50_ms(results.direct_ttft)},
        "throughputRatio": results.throughput_ratio,
        "overheadMs": results.overhead_ms,
        "ttftOverheadMs": results.ttft_overhead_ms,
        "cpu": {key: row.as_json() for key, row in results.cpu_rows(settings.concurrency).items()},
        "wrk": proxy_wrk.as_json(results.wrk),
        "wrkMissing": results.wrk_missing,
    }


def parse_args(argv: Sequence[str] | None = None) -> tuple[ProxySettings, Path | None]:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench proxy", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=5.0, help="seconds of the wide phases")
    p.add_argument("--sequential-duration", type=float, default=3.0, help="seconds at c=1")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds before each phase")
    p.add_argument("--latency-ms", type=float, default=0.0, help="the echo backend's delay")
    p.add_argument(
        "--workers",
        type=counts,
        default=(1,),
        help="API server processes, comma-separated counts run one after another (1,2)",
    )
    p.add_argument(
        "--wrk-connections",
        type=counts,
        default=(1, 16),
        help="the wrk phase's connection counts, one request in flight each (1,16)",
    )
    p.add_argument("--no-wrk", action="store_true", help="skip the wrk phase")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    args = p.parse_args(argv)
    settings = ProxySettings(
        concurrency=args.concurrency,
        duration=args.duration,
        sequential_duration=args.sequential_duration,
        warmup=args.warmup,
        latency_ms=args.latency_ms,
        api_processes=args.workers,
        wrk_connections=() if args.no_wrk else args.wrk_connections,
    )
    return settings, args.json


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    runs: dict[int, ProxyResults] = {}
    for count in settings.api_processes:
        with tempfile.TemporaryDirectory(prefix="plnt-bench-proxy-") as workdir:
            runs[count] = asyncio.run(bench(settings, Path(workdir), api_processes=count))
    if len(runs) == 1:
        results = next(iter(runs.values()))
        reports.write(report(results, settings), as_json(results, settings), json_path)
        return 0
    lines: list[str] = []
    for count, results in runs.items():
        lines += [f"== --workers {count}", *report(results, settings)]
    lines += api_process_ratios(runs)
    document = {
        "workers": {str(count): as_json(results, settings) for count, results in runs.items()}
    }
    reports.write(lines, document, json_path)
    return 0


def api_process_ratios(runs: dict[int, ProxyResults]) -> list[str]:
    """Proxied chats/s at every count against the first count's, each beside the direct
    chats/s of the same run (the runner's ceiling moves with the load)."""
    (first, baseline), *others = runs.items()
    lines = [f"proxied chats/s against --workers {first} (target x{API_PROCESSES_TARGET} at 2):"]
    for count, results in others:
        if baseline.proxy.rate == 0:
            continue
        ratio = results.proxy.rate / baseline.proxy.rate
        miss = "  (below target)" if count == 2 * first and ratio < API_PROCESSES_TARGET else ""
        lines.append(
            f"  chat --workers {count}: {results.proxy.rate:8.0f}/s vs "
            f"{baseline.proxy.rate:8.0f}/s  x{ratio:.2f}{miss}; "
            f"direct {results.direct.rate:.0f}/s vs {baseline.direct.rate:.0f}/s"
        )
    return lines
