"""Load phases and the report of the Invocation benchmark (`python -m plnt.bench invocations`).

Three questions, each answered against a floor measured in the same run:

* **overhead**, at concurrency 1: a durable Invocation (POST it, then the shared watch
  sees it `Succeeded`) against a synchronous `POST …/workflowruns/NAME/invoke` of the
  same trivial workflow on the same run: p50 and p99 of each, and their differences;
* **throughput**, at `concurrency`: Invocations finished per second against bare
  Temporal executions of a one-activity workflow (`plnt.bench.bareflows`) on the same
  Temporal server, started and waited for by this process's Temporal client;
* **durability's cost**: the immediate recordings of a call's progress (each step's end
  sent to Temporal as it happens, `plnt.sagas.invoking.checkpointing`), read from
  `plnt up`'s `/metrics` around the c=1 phase: recordings per Invocation, the time each
  took, and that time per Invocation against the durable p50 (an upper bound: recordings
  run beside the call, not in front of it);
* **memory**: the resident set of an API server (the API server benchmark's child, with
  its watch cache) holding `rss_objects` WorkflowRuns, then as many finished
  Invocations besides, cloned from one this run's workflow finished.

Why apart from the run (`invocations_running`): these need only HTTP, the plnt client and
a Temporal client, so the report's arithmetic is tested without starting anything.

Errors: none of its own; a failed call counts in `PhaseStats.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from temporalio import client as temporal_client
from temporalio.service import RPCError

from plnt.api import names
from plnt.bench import apiserver as harness
from plnt.bench import bareflows, reports
from plnt.bench.settings import InvocationsBenchmarkSettings
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes import tasks

PhaseStats = harness.PhaseStats
Operation = Callable[[int], Awaitable[bool]]

OVERHEAD_TARGET_P50_MS = 100.0
THROUGHPUT_TARGET = 0.5
RSS_TARGET_MB = 200.0
FINISHED = names.INVOCATION_FINISHED_PHASES
INPUTS = {"topic": "etcd"}
CALL_WITHIN_S = 120.0


@dataclass(slots=True)
class InvocationResults:
    sync: PhaseStats = field(default_factory=PhaseStats)
    durable: PhaseStats = field(default_factory=PhaseStats)
    durable_wide: PhaseStats = field(default_factory=PhaseStats)
    bare_wide: PhaseStats = field(default_factory=PhaseStats)
    rss_objects: int = 0
    rss_started_bytes: int = 0
    rss_runs_bytes: int = 0
    rss_loaded_bytes: int = 0
    template_bytes: int = 0
    """Size of the finished Invocation cloned for the memory phase, as stored."""
    checkpoints: Checkpoints = field(default_factory=lambda: Checkpoints())
    """The immediate recordings of the durable c=1 phase (warm-up included)."""

    def overhead_ms(self, q: float) -> float:
        return self.durable.percentile_ms(q) - self.sync.percentile_ms(q)

    @property
    def throughput_ratio(self) -> float:
        return self.durable_wide.rate / self.bare_wide.rate if self.bare_wide.rate else 0.0


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """Counts of `plnt_invocation_checkpoint*` (`plnt.sagas.metrics`), or their change."""

    calls: float = 0.0
    recorded: float = 0.0
    seconds: float = 0.0

    def __sub__(self, earlier: Checkpoints) -> Checkpoints:
        return Checkpoints(
            self.calls - earlier.calls,
            self.recorded - earlier.recorded,
            self.seconds - earlier.seconds,
        )

    @property
    def per_call(self) -> float:
        return self.recorded / self.calls if self.calls else 0.0

    @property
    def ms_each(self) -> float:
        return self.seconds * 1000.0 / self.recorded if self.recorded else 0.0

    @property
    def ms_per_call(self) -> float:
        return self.seconds * 1000.0 / self.calls if self.calls else 0.0


CHECKPOINT_SERIES = {
    "plnt_invocation_checkpoint_calls_total": "calls",
    "plnt_invocation_checkpoints_total": "recorded",
    "plnt_invocation_checkpoint_seconds_total": "seconds",
}


def checkpoints_of(metrics: str) -> Checkpoints:
    """The recording counters in a Prometheus text exposition (0 for a missing one)."""
    found = dict.fromkeys(CHECKPOINT_SERIES.values(), 0.0)
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name in CHECKPOINT_SERIES:
            found[CHECKPOINT_SERIES[name]] = float(value)
    return Checkpoints(**found)


async def read_checkpoints(client: PlntClient) -> Checkpoints:
    """`plnt up`'s counters now (its in-process worker's families are on its /metrics)."""
    answer = await client.request("GET", "/metrics")
    return checkpoints_of(answer.body.decode())


# -- the durable call ---------------------------------------------------------------------


class Finishes:
    """One watch of a namespace's Invocations that resolves, by name, the calls waiting
    for their end: True when it Succeeded. The benchmark's `kubectl wait`, shared by every
    call, as a client with many Invocations in flight would watch them."""

    def __init__(self, client: PlntClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.waiting: dict[str, asyncio.Future[bool]] = {}

    def expect(self, name: str) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[name] = future
        return future

    async def follow(self) -> None:
        path = self.client.collection_path("invocations", namespace=self.namespace)
        listed = (await self.client.request("GET", path, params={"limit": 1})).json()
        revision = str(listed["metadata"]["resourceVersion"])
        while True:
            params: dict[str, str | int | bool] = {
                "resourceVersion": revision,
                "allowWatchBookmarks": True,
            }
            try:
                async for event in self.client.watch(path, params=params):
                    meta = event.object.get("metadata") or {}
                    revision = str(meta.get("resourceVersion") or revision)
                    phase = (event.object.get("status") or {}).get("phase")
                    if event.type in ("ADDED", "MODIFIED") and phase in FINISHED:
                        future = self.waiting.pop(str(meta.get("name")), None)
                        if future is not None and not future.done():
                            future.set_result(phase == "Succeeded")
            except client_errors.Gone:  # fell behind the window: start from now
                listed = (await self.client.request("GET", path, params={"limit": 1})).json()
                revision = str(listed["metadata"]["resourceVersion"])

    @contextlib.asynccontextmanager
    async def following(self) -> AsyncIterator[None]:
        async with tasks.running(self.follow(), name="invocation finishes"):
            yield


def manifest(name: str, run: str) -> bytes:
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.INVOCATION_KIND,
        "metadata": {"name": name},
        "spec": {"workflowRun": run, "inputs": INPUTS},
    }
    return json.dumps(body, separators=(",", ":")).encode()


def durable_call(
    session: aiohttp.ClientSession, url: str, finishes: Finishes, *, run: str, prefix: str
) -> Operation:
    """POST Invocation `{prefix}-{seq}`, then wait until the watch sees it Succeeded."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    async def operation(seq: int) -> bool:
        name = f"{prefix}-{seq:06d}"
        finished = finishes.expect(name)
        try:
            async with session.post(url, data=manifest(name, run), headers=headers) as response:
                await response.read()
                if response.status != 201:
                    return False
            async with asyncio.timeout(CALL_WITHIN_S):
                return await finished
        except (aiohttp.ClientError, TimeoutError):
            return False
        finally:
            finishes.waiting.pop(name, None)

    return operation


def bare_execution(client: temporal_client.Client, *, task_queue: str, prefix: str) -> Operation:
    """Start `BareInvocation` `bare/{prefix}/{seq}` and wait for its result."""

    async def operation(seq: int) -> bool:
        try:
            await client.execute_workflow(
                bareflows.WORKFLOW, INPUTS, id=f"bare/{prefix}/{seq:06d}", task_queue=task_queue
            )
        except (RPCError, temporal_client.WorkflowFailureError):
            return False
        return True

    return operation


# -- the report ---------------------------------------------------------------------------


def report(results: InvocationResults, settings: InvocationsBenchmarkSettings) -> list[str]:
    """The human-readable table, with the ratios and the targets."""
    lines = [
        f"invocations: c=1 for {settings.sequential_duration:g} s, "
        f"then c={settings.concurrency} for {settings.duration:g} s",
        reports.phase_header(26),
    ]
    for label, stats in (
        ("sync invoke c=1", results.sync),
        ("durable invocation c=1", results.durable),
        (f"durable invocation c={settings.concurrency}", results.durable_wide),
        (f"bare temporal c={settings.concurrency}", results.bare_wide),
    ):
        lines.append(reports.phase_row(label, stats, width=26))
    p50, p99 = results.overhead_ms(0.5), results.overhead_ms(0.99)
    sync50 = results.sync.percentile_ms(0.5)
    ratio50 = results.durable.percentile_ms(0.5) / sync50 if sync50 else 0.0
    ratio = results.throughput_ratio
    lines += [
        f"overhead durable-sync p50 {p50:8.2f} ms  target <= {OVERHEAD_TARGET_P50_MS:g} ms  "
        f"{reports.verdict(p50 <= OVERHEAD_TARGET_P50_MS)}",
        f"overhead durable-sync p99 {p99:8.2f} ms",
        f"ratio durable/sync p50    {ratio50:8.2f}",
        f"ratio invocations/bare temporal c={settings.concurrency} {ratio:5.2f}  "
        f"target >= {THROUGHPUT_TARGET:.2f}  {reports.verdict(ratio >= THROUGHPUT_TARGET)}",
    ]
    marks = results.checkpoints
    durable50 = results.durable.percentile_ms(0.5)
    share = marks.ms_per_call / durable50 if durable50 else 0.0
    lines.append(
        f"step-end recordings c=1  {marks.per_call:5.2f} per Invocation, "
        f"{marks.ms_each:6.2f} ms each, {marks.ms_per_call:6.2f} ms per Invocation "
        f"({share:.1%} of the durable p50, off the call's path)"
    )
    if results.rss_loaded_bytes:
        mb = 2**20
        loaded = results.rss_loaded_bytes / mb
        per = (
            (results.rss_loaded_bytes - results.rss_runs_bytes) / results.rss_objects / 1024
            if results.rss_objects
            else 0.0
        )
        lines += [
            f"RSS api server {loaded:6.1f} MB with {results.rss_objects} finished Invocations "
            f"beside {results.rss_objects} WorkflowRuns ({results.rss_runs_bytes / mb:.1f} MB "
            f"with the runs alone, {results.rss_started_bytes / mb:.1f} MB empty)  "
            f"target <= {RSS_TARGET_MB:.0f} MB  {reports.verdict(loaded <= RSS_TARGET_MB)}",
            f"RSS per finished Invocation {per:6.2f} KiB (stored {results.template_bytes} B)",
        ]
    return lines


def as_json(results: InvocationResults, settings: InvocationsBenchmarkSettings) -> dict[str, Any]:
    """The results as one JSON object (`invocations_command` prints it last)."""

    sync50 = results.sync.percentile_ms(0.5)
    return {
        "concurrency": settings.concurrency,
        "sync": reports.phase_json(results.sync),
        "durable": reports.phase_json(results.durable),
        "durable_wide": reports.phase_json(results.durable_wide),
        "bare_wide": reports.phase_json(results.bare_wide),
        "overhead_p50_ms": results.overhead_ms(0.5),
        "overhead_p99_ms": results.overhead_ms(0.99),
        "overhead_ratio_p50": results.durable.percentile_ms(0.5) / sync50 if sync50 else 0.0,
        "throughput_ratio": results.throughput_ratio,
        "checkpoints": {
            "calls": results.checkpoints.calls,
            "recorded": results.checkpoints.recorded,
            "seconds": results.checkpoints.seconds,
            "per_call": results.checkpoints.per_call,
            "ms_each": results.checkpoints.ms_each,
            "ms_per_call": results.checkpoints.ms_per_call,
        },
        "rss": {
            "objects": results.rss_objects,
            "started": results.rss_started_bytes,
            "runs": results.rss_runs_bytes,
            "loaded": results.rss_loaded_bytes,
            "template_bytes": results.template_bytes,
        },
        "targets": {
            "overhead_p50_ms": OVERHEAD_TARGET_P50_MS,
            "throughput_ratio": THROUGHPUT_TARGET,
            "rss_mb": RSS_TARGET_MB,
        },
    }
