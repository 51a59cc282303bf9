"""Load phases for the deploy saga benchmark: apply → Ready latency, and invoke via the API.

Why a library apart from the `bench/saga.py` script: the phases need only the plnt
HTTP API (`plnt.client`) and plain HTTP to a runner, so they live in the `bench`
layer (typed, importable by tests), while the script owns the processes (Temporal,
`plnt up`) that layers above provide. Nothing here imports the sagas: a deploy is
observed the way a user observes it, through a watch on the WorkflowRun.

Deploy latency is measured from just before the create request is sent until the
watch delivers the object with its Ready condition True for the created generation.
The watch resumes from the create's resourceVersion, so a fast deploy is not missed.

Invoke is measured twice in one run, with the same closed loop, the same body and
the same concurrency: through the API server (`POST …/workflowruns/{name}/invoke`
over HTTPS with the admin client certificate) and directly on the runner the API
server would pick (`POST {endpoint}/invoke`). Both clients keep connections alive.

Errors: a failed invocation counts in `PhaseStats.errors` (the phase goes on);
`BenchError` (from `plnt.bench.apiserver`) when a deploy does not become Ready or a
run cannot be deleted before its deadline; `plnt.client.errors` pass through.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp

from plnt.bench import apiserver as harness
from plnt.client import errors as client_errors
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.client.transport import WatchEvent

PhaseStats = harness.PhaseStats
BenchError = harness.BenchError
INVOKE_BODY = b'{"inputs":{"topic":"etcd"}}'
DEPLOY_TARGET_P50_S = 3.0
THROUGHPUT_TARGET = 0.7
OVERHEAD_TARGET_MS = 1.0


@dataclass(frozen=True, slots=True)
class InvokeSettings:
    """How long and how wide each invoke phase runs."""

    concurrency: int = 16
    duration: float = 5.0
    sequential_duration: float = 5.0
    warmup: float = 0.5


@dataclass(slots=True)
class InvokeResults:
    """The four invoke phases: API and direct, at `concurrency` and sequentially."""

    api: PhaseStats
    direct: PhaseStats
    api_sequential: PhaseStats
    direct_sequential: PhaseStats
    bare: PhaseStats | None = None
    bare_sequential: PhaseStats | None = None

    @property
    def throughput_ratio(self) -> float:
        return self.api.rate / self.direct.rate if self.direct.rate else 0.0

    @property
    def overhead_ms(self) -> float:
        """p50 of one call through the API minus p50 of one direct call, sequentially."""
        return self.api_sequential.percentile_ms(0.5) - self.direct_sequential.percentile_ms(0.5)

    @property
    def concurrent_overhead_ms(self) -> float:
        return self.api.percentile_ms(0.5) - self.direct.percentile_ms(0.5)

    @property
    def bare_throughput_ratio(self) -> float | None:
        """The bare proxy's calls/s over direct: the ratio any Python HTTP hop reaches here."""
        if self.bare is None or not self.direct.rate:
            return None
        return self.bare.rate / self.direct.rate

    @property
    def bare_overhead_ms(self) -> float | None:
        """p50 through the bare proxy minus p50 direct, sequentially."""
        if self.bare_sequential is None:
            return None
        return self.bare_sequential.percentile_ms(0.5) - self.direct_sequential.percentile_ms(0.5)


@dataclass(slots=True)
class SagaResults:
    """Everything one benchmark run measured."""

    deploy_seconds: list[float] = field(default_factory=list)
    invoke: InvokeResults | None = None
    endpoint: str = ""


# -- deploys ------------------------------------------------------------------------------


def workflowrun(name: str, *, ref: str, digest: str) -> dict[str, Any]:
    """A WorkflowRun of the published spec on the built-in echo backend, one replica."""
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": {"ref": ref, "digest": digest}, "replicas": 1},
    }


def is_ready(obj: Mapping[str, Any]) -> bool:
    """Ready is True and describes the object's current generation."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    if status.get("observedGeneration") != generation:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def runner_endpoint(obj: Mapping[str, Any]) -> str:
    """The first endpoint of the first traffic target (what the API server forwards to)."""
    traffic = (obj.get("status") or {}).get("traffic") or []
    endpoints = traffic[0].get("endpoints") if traffic else None
    if not endpoints:
        raise BenchError(f"the ready run has no endpoint in status.traffic: {traffic}")
    return str(endpoints[0]).rstrip("/")


async def deploy_once(
    client: PlntClient,
    name: str,
    *,
    namespace: str,
    ref: str,
    digest: str,
    within: float = 120.0,
) -> tuple[float, dict[str, Any]]:
    """Create a run and watch it until Ready; (seconds from create sent, the Ready object)."""
    began = time.perf_counter()
    created = await client.create_workflowrun(
        workflowrun(name, ref=ref, digest=digest), namespace=namespace
    )
    latest: dict[str, Any] = created
    try:
        async with asyncio.timeout(within):
            while True:  # a watch may end (timeoutSeconds): resume from the last version
                version = (latest.get("metadata") or {}).get("resourceVersion")
                # The client's watch is an async generator: close it when leaving early.
                events = cast(
                    AsyncGenerator[WatchEvent, None],
                    client.watch_workflowrun(
                        name, namespace=namespace, resource_version=version, timeout_seconds=60
                    ),
                )
                async with contextlib.aclosing(events):
                    async for event in events:
                        if event.type == "BOOKMARK":
                            latest.setdefault("metadata", {})["resourceVersion"] = (
                                event.object.get("metadata") or {}
                            ).get("resourceVersion")
                            continue
                        if event.type == "DELETED":
                            raise BenchError(f"workflowrun {name} was deleted while deploying")
                        latest = event.object
                        if is_ready(latest):
                            return time.perf_counter() - began, latest
    except TimeoutError as error:
        phase = (latest.get("status") or {}).get("phase")
        raise BenchError(
            f"workflowrun {name} not Ready after {within:.0f} s (phase {phase}): "
            f"{latest.get('status')}"
        ) from error


async def delete_and_wait(
    client: PlntClient, name: str, *, namespace: str, within: float = 120.0
) -> None:
    """Delete a run and wait until it is gone (its saga tore the runners down)."""
    path = client.object_path(WORKFLOWRUNS, name, namespace=namespace)
    with contextlib.suppress(client_errors.NotFound):
        await client.request("DELETE", path)
    deadline = time.monotonic() + within
    delay = 0.02
    while True:
        try:
            await client.request("GET", path)
        except client_errors.NotFound:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"workflowrun {name} still exists {within:.0f} s after delete")
        await asyncio.sleep(delay)  # poll with backoff until the finalizer is released
        delay = min(delay * 2, 0.25)


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
) -> PhaseStats:
    """A warm-up (discarded), then `duration` seconds of closed loop; at least one call."""
    if warmup > 0:
        await harness.run_closed_loop(operation, concurrency=concurrency, duration=warmup)
    return await harness.run_closed_loop(
        operation, concurrency=concurrency, duration=duration, min_ops=1
    )


async def invoke_phases(
    api: aiohttp.ClientSession,
    direct: aiohttp.ClientSession,
    *,
    api_url: str,
    direct_url: str,
    settings: InvokeSettings,
    bare_url: str | None = None,
) -> InvokeResults:
    """Through the API, directly (and through the bare proxy), wide and then one at a time.

    The bare proxy is reached with the `direct` session (plain HTTP, like the runner).
    """
    through, straight = invoke_operation(api, api_url), invoke_operation(direct, direct_url)
    bare = invoke_operation(direct, bare_url) if bare_url else None

    async def run(operation: Callable[[int], Awaitable[bool]], *, wide: bool) -> PhaseStats:
        return await measure(
            operation,
            concurrency=settings.concurrency if wide else 1,
            duration=settings.duration if wide else settings.sequential_duration,
            warmup=settings.warmup,
        )

    results = InvokeResults(
        api=await run(through, wide=True),
        direct=await run(straight, wide=True),
        api_sequential=await run(through, wide=False),
        direct_sequential=await run(straight, wide=False),
    )
    if bare is not None:
        results.bare = await run(bare, wide=True)
        results.bare_sequential = await run(bare, wide=False)
    return results


def http_session(*, pool: int) -> aiohttp.ClientSession:
    """A plain-HTTP keep-alive session for the runner (`pool` connections)."""
    connector = aiohttp.TCPConnector(limit=pool, limit_per_host=pool)
    timeout = aiohttp.ClientTimeout(total=60, sock_connect=30)
    return aiohttp.ClientSession(connector=connector, timeout=timeout)


# -- the report ---------------------------------------------------------------------------


def _seconds(values: Sequence[float], q: float) -> float:
    return harness.percentile(values, q)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


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
            f"{_verdict(p50 <= DEPLOY_TARGET_P50_S)}",
        ]
    invoke = results.invoke
    if invoke is not None:
        lines += [
            f"invoke: concurrency {settings.concurrency} for {settings.duration:g} s, "
            f"then 1 for {settings.sequential_duration:g} s; runner {results.endpoint}",
            f"{'phase':<22}{'calls/s':>10}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'errors':>8}",
        ]
        phases: list[tuple[str, PhaseStats | None]] = [
            (f"api c={settings.concurrency}", invoke.api),
            (f"direct c={settings.concurrency}", invoke.direct),
            (f"bare proxy c={settings.concurrency}", invoke.bare),
            ("api c=1", invoke.api_sequential),
            ("direct c=1", invoke.direct_sequential),
            ("bare proxy c=1", invoke.bare_sequential),
        ]
        for label, stats in phases:
            if stats is None:
                continue
            lines.append(
                f"{label:<22}{stats.rate:>10.1f}{stats.percentile_ms(0.5):>10.2f}"
                f"{stats.percentile_ms(0.95):>10.2f}{stats.percentile_ms(0.99):>10.2f}"
                f"{stats.errors:>8}"
            )
        ratio, overhead = invoke.throughput_ratio, invoke.overhead_ms
        lines += [
            f"ratio invoke api/direct {ratio:6.2f}  target >= {THROUGHPUT_TARGET:.2f}  "
            f"{_verdict(ratio >= THROUGHPUT_TARGET)}",
            f"overhead p50 c=1        {overhead:6.2f} ms  target <= {OVERHEAD_TARGET_MS:g} ms  "
            f"{_verdict(overhead <= OVERHEAD_TARGET_MS)}",
            f"overhead p50 c={settings.concurrency:<8} {invoke.concurrent_overhead_ms:6.2f} ms",
        ]
        bare_ratio, bare_overhead = invoke.bare_throughput_ratio, invoke.bare_overhead_ms
        if bare_ratio is not None and bare_overhead is not None:
            lines += [
                f"floor: bare proxy/direct {bare_ratio:5.2f}, overhead p50 c=1 "
                f"{bare_overhead:5.2f} ms (plain HTTP, no TLS, no middleware)",
            ]
    return lines


def as_json(results: SagaResults, settings: InvokeSettings) -> dict[str, Any]:
    """The results as one JSON object (the script prints it as its last line)."""

    def phase(stats: PhaseStats) -> dict[str, float]:
        return {
            "rate": stats.rate,
            "ops": stats.ops,
            "errors": stats.errors,
            "p50_ms": stats.percentile_ms(0.5),
            "p95_ms": stats.percentile_ms(0.95),
            "p99_ms": stats.percentile_ms(0.99),
        }

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
    invoke = results.invoke
    if invoke is not None:
        out["invoke"] = {
            "concurrency": settings.concurrency,
            "duration_s": settings.duration,
            "api": phase(invoke.api),
            "direct": phase(invoke.direct),
            "api_sequential": phase(invoke.api_sequential),
            "direct_sequential": phase(invoke.direct_sequential),
            "throughput_ratio": invoke.throughput_ratio,
            "overhead_p50_ms": invoke.overhead_ms,
            "concurrent_overhead_p50_ms": invoke.concurrent_overhead_ms,
            "target_throughput_ratio": THROUGHPUT_TARGET,
            "target_overhead_ms": OVERHEAD_TARGET_MS,
        }
        if invoke.bare is not None and invoke.bare_sequential is not None:
            out["invoke"].update(
                bare=phase(invoke.bare),
                bare_sequential=phase(invoke.bare_sequential),
                bare_throughput_ratio=invoke.bare_throughput_ratio,
                bare_overhead_p50_ms=invoke.bare_overhead_ms,
            )
    return out
