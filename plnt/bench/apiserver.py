"""Load phases for the API server benchmark: the same work against raw etcd and over HTTPS.

Why apart from the run (`apiserver_running`): the phases need only the storage
client and an HTTPS session, not the processes, so tests import them without
starting etcd or the API server child.

Every phase is closed-loop: `concurrency` callers each issue one request, wait
for the answer and issue the next, until the phase's deadline. The clients
decode nothing they do not need (a GET body is read, not parsed; a LIST body is
searched for its continue token), on both sides, so the comparison is about
the server, not the load generator's JSON parser.

The watch fan-out is open-loop instead: creates are sent at a fixed rate, each
carrying a probe annotation with its sequence number and the client's
`time.monotonic_ns()` at send time; watchers in the same process read the
annotation back, so the delay needs no clock agreement between processes. The
watchers read whatever bytes have arrived and look only for the probe in each
line (`probes`), so parsing 20,000 lines a second costs the generator little; the
CPU the generator and the server spent per delivered event is reported beside the
delays, so a figure limited by the generator shows as such.

Errors: a request that fails counts in `PhaseStats.errors` (the phase goes on);
`BenchmarkError` when a phase cannot run at all (e.g. watchers fail to open).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import uvloop

from plnt.api import names
from plnt.bench import cputime
from plnt.storage.etcd import EtcdStore

GROUP_PATH = names.GROUP_PATH
PROBE = "bench.plnt.work/probe"
_PROBE_NEEDLE = f'"{PROBE}":"'.encode()
_CONTINUE_NEEDLE = b'"continue":"'
DIGEST = "sha256:" + "ab" * 32


class BenchmarkError(RuntimeError):
    """A phase could not run (not a slow result: those are reported, never raised)."""


@dataclass(slots=True)
class PhaseStats:
    """Completed operations, errors, wall time and per-operation latencies (seconds), and
    the CPU seconds each watched process group used during the phase (`cputime`)."""

    ops: int = 0
    errors: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.ops / self.elapsed if self.elapsed > 0 else 0.0

    def cpu_ms(self, name: str) -> float | None:
        """Group `name`'s CPU milliseconds per request sent (failed ones too)."""
        return cputime.per_request_ms(self.cpu, name, self.ops + self.errors)

    def percentile_ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000.0


@dataclass(slots=True)
class WatchStats:
    """What the watchers saw of the probe creates."""

    watchers: int
    events: int
    delivered: int = 0
    complete_watchers: int = 0
    delays_since_send: list[float] = field(default_factory=list)
    delays_since_answer: list[float] = field(default_factory=list)
    create_latencies: list[float] = field(default_factory=list)
    create_errors: int = 0
    elapsed: float = 0.0
    """Seconds from the first create to the last watcher complete (or the settle timeout)."""
    generator_cpu: float = 0.0
    """CPU seconds this process (watchers and creates) spent meanwhile."""
    server_cpu: float = 0.0
    """CPU seconds the server process spent meanwhile (0 when its pid is unknown)."""

    @property
    def expected(self) -> int:
        return self.watchers * self.events

    @property
    def all_delivered(self) -> bool:
        return self.delivered == self.expected and self.create_errors == 0


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def workflowrun(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, object]:
    """A valid WorkflowRun body."""
    metadata: dict[str, object] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.WORKFLOWRUN_KIND,
        "metadata": metadata,
        "spec": {"workflow": {"ref": "oci://registry.local/bench/workflow:1", "digest": DIGEST}},
    }


def resource_path(namespace: str, name: str = "") -> str:
    base = f"{GROUP_PATH}/namespaces/{namespace}/workflowruns"
    return f"{base}/{name}" if name else base


def client_ssl_context(*, ca_cert: Path, client_cert: Path, client_key: Path) -> ssl.SSLContext:
    """Verify the server against `ca_cert` and present the given client certificate."""
    context = ssl.create_default_context(cafile=str(ca_cert))
    context.load_cert_chain(certfile=str(client_cert), keyfile=str(client_key))
    return context


def https_session(context: ssl.SSLContext, *, pool: int) -> aiohttp.ClientSession:
    """A keep-alive session whose pool holds `pool` connections (0 = unbounded)."""
    connector = aiohttp.TCPConnector(ssl=context, limit=pool, limit_per_host=pool)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
    return aiohttp.ClientSession(connector=connector, timeout=timeout)


async def run_closed_loop(
    operation: Callable[[int], Awaitable[bool]],
    *,
    concurrency: int,
    duration: float,
    min_ops: int = 0,
    meter: cputime.Meter | None = None,
) -> PhaseStats:
    """`concurrency` callers call `operation(seq)` back to back until `duration` has passed.

    `operation` returns False for a failed request. At least `min_ops`
    operations complete even if that takes longer than `duration`. With a `meter`, the
    CPU its groups used meanwhile goes to `PhaseStats.cpu`.
    """
    stats = PhaseStats()
    cpu_before = meter.snapshot() if meter is not None else None
    counter = iter(range(1 << 62))
    start = time.perf_counter()
    deadline = start + duration

    async def caller() -> None:
        while True:
            now = time.perf_counter()
            if now >= deadline and stats.ops + stats.errors >= min_ops:
                return
            seq = next(counter)
            began = time.perf_counter()
            ok = await operation(seq)
            if ok:
                stats.ops += 1
                stats.latencies.append(time.perf_counter() - began)
            else:
                stats.errors += 1

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    stats.elapsed = time.perf_counter() - start
    if meter is not None and cpu_before is not None:
        stats.cpu = meter.since(cpu_before)
    return stats


# -- raw etcd ---------------------------------------------------------------------------


def raw_get(store: EtcdStore, keys: Sequence[str]) -> Callable[[int], Awaitable[bool]]:
    async def operation(seq: int) -> bool:
        try:
            await store.get(keys[(seq * 7919) % len(keys)])
        except Exception:
            return False
        return True

    return operation


def raw_create(store: EtcdStore, prefix: str, value: bytes) -> Callable[[int], Awaitable[bool]]:
    async def operation(seq: int) -> bool:
        try:
            await store.create(f"{prefix}{seq:09d}", value)
        except Exception:
            return False
        return True

    return operation


def raw_list(store: EtcdStore, prefix: str, *, page: int) -> Callable[[int], Awaitable[bool]]:
    """One operation is a full paged list of `prefix`."""

    async def operation(seq: int) -> bool:
        del seq
        try:
            result = await store.list(prefix, limit=page)
            while result.continue_token is not None:
                result = await store.list(prefix, limit=page, continue_token=result.continue_token)
        except Exception:
            return False
        return True

    return operation


# -- HTTPS ------------------------------------------------------------------------------


def http_get(
    session: aiohttp.ClientSession, urls: Sequence[str]
) -> Callable[[int], Awaitable[bool]]:
    async def operation(seq: int) -> bool:
        try:
            async with session.get(urls[(seq * 7919) % len(urls)]) as response:
                await response.read()
                return response.status == 200
        except aiohttp.ClientError:
            return False

    return operation


def http_create(
    session: aiohttp.ClientSession, url: str, *, name_prefix: str
) -> Callable[[int], Awaitable[bool]]:
    async def operation(seq: int) -> bool:
        body = json.dumps(workflowrun(f"{name_prefix}{seq:09d}")).encode()
        headers = {"Content-Type": "application/json"}
        try:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                return response.status == 201
        except aiohttp.ClientError:
            return False

    return operation


def continue_token(body: bytes) -> str | None:
    """The list's `metadata.continue`, found before `items` without parsing the items."""
    head_end = body.find(b'"items"')
    head = body if head_end < 0 else body[:head_end]
    start = head.find(_CONTINUE_NEEDLE)
    if start < 0:
        return None
    start += len(_CONTINUE_NEEDLE)
    token = head[start : head.index(b'"', start)].decode()
    return token or None


def http_list(
    session: aiohttp.ClientSession,
    url: str,
    *,
    page: int,
    expect: int,
    resource_version: str | None = None,
) -> Callable[[int], Awaitable[bool]]:
    """One operation is a full paged list; it fails unless it saw `expect` items' pages.

    `resource_version` goes on the first page only (later pages carry the token).
    """
    pages_expected = -(-expect // page) if expect else 1

    async def operation(seq: int) -> bool:
        del seq
        token: str | None = None
        pages = 0
        try:
            while True:
                params = {"limit": str(page)}
                if token:
                    params["continue"] = token
                elif resource_version is not None:
                    params["resourceVersion"] = resource_version
                async with session.get(url, params=params) as response:
                    body = await response.read()
                    if response.status != 200:
                        return False
                pages += 1
                token = continue_token(body)
                if token is None:
                    return pages == pages_expected
        except aiohttp.ClientError:
            return False

    return operation


async def wait_for_count(
    session: aiohttp.ClientSession, url: str, *, count: int, within: float
) -> None:
    """Wait (with a deadline) until a list of `url` reports at least `count` items."""
    deadline = time.monotonic() + within
    seen = -1
    while time.monotonic() < deadline:
        async with session.get(url, params={"limit": "1"}) as response:
            body = json.loads(await response.read())
        remaining = body.get("metadata", {}).get("remainingItemCount") or 0
        seen = len(body.get("items", [])) + int(remaining)
        if seen >= count:
            return
        await asyncio.sleep(0.1)  # polling a condition with a deadline
    raise BenchmarkError(f"{url} holds {seen} items, expected {count}, after {within}s")


# -- watch fan-out ----------------------------------------------------------------------


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of process `pid` with its descendants (a server's sibling
    API processes under `--workers N`), or of this process when None, from /proc."""
    if pid is None:
        times = os.times()
        return times.user + times.system
    return cputime.Meter([cputime.Watched("tree", pid, tree=True)]).snapshot().get("tree", 0.0)


def probes(buffered: bytes, data: bytes) -> tuple[list[tuple[int, int]], bytes]:
    """The probes in the complete lines of `buffered + data`, and the incomplete rest."""
    lines = (buffered + data).split(b"\n")
    rest = lines.pop()
    found = []
    for line in lines:
        probe = _probe(line)
        if probe is not None:
            found.append(probe)
    return found, rest


def _probe(line: bytes) -> tuple[int, int] | None:
    """(sequence, send time in ns) from an ADDED event's probe annotation, without json."""
    if not line.startswith(b'{"type":"ADDED"'):
        return None
    start = line.find(_PROBE_NEEDLE)
    if start < 0:
        return None
    start += len(_PROBE_NEEDLE)
    seq, sent = line[start : line.index(b'"', start)].split(b":")
    return int(seq), int(sent)


async def watch_fanout(
    base_url: str,
    context: ssl.SSLContext,
    *,
    namespace: str,
    watchers: int,
    events: int,
    rate: float,
    settle_timeout: float = 15.0,
    server_pid: int | None = None,
) -> WatchStats:
    """Open `watchers` watches on `namespace`, create `events` probes at `rate`/s, collect.

    The watchers and the creates run on a uvloop event loop in a thread of their own
    (the caller's loop only waits meanwhile, so the two never contend for the GIL):
    this side must read 20,000 events a second at the default rate, and uvloop's TLS
    and socket handling cost it about a fifth less CPU per received event than
    asyncio's in back-to-back runs here. `server_pid`: the server process, whose CPU
    time is reported beside this one's.
    """

    def run() -> WatchStats:
        async def fanout() -> WatchStats:
            async with https_session(context, pool=0) as writer:
                return await _watch_fanout(
                    base_url,
                    context,
                    writer,
                    namespace=namespace,
                    watchers=watchers,
                    events=events,
                    rate=rate,
                    settle_timeout=settle_timeout,
                    server_pid=server_pid,
                )

        return uvloop.run(fanout())

    return await asyncio.to_thread(run)


async def _watch_fanout(
    base_url: str,
    context: ssl.SSLContext,
    writer: aiohttp.ClientSession,
    *,
    namespace: str,
    watchers: int,
    events: int,
    rate: float,
    settle_timeout: float,
    server_pid: int | None,
) -> WatchStats:
    stats = WatchStats(watchers=watchers, events=events)
    list_url = base_url + resource_path(namespace)
    async with writer.get(list_url, params={"limit": "1"}) as response:
        if response.status != 200:
            raise BenchmarkError(f"list of {namespace} answered {response.status}")
        revision = json.loads(await response.read())["metadata"]["resourceVersion"]
    received: list[list[tuple[int, int, int]]] = [[] for _ in range(watchers)]
    opened = 0
    all_open = asyncio.Event()
    done = [asyncio.Event() for _ in range(watchers)]
    params = {"watch": "true", "resourceVersion": revision, "timeoutSeconds": "3600"}

    async def watcher(index: int, session: aiohttp.ClientSession) -> None:
        nonlocal opened
        seen = received[index]
        async with session.get(list_url, params=params) as response:
            if response.status != 200:
                raise BenchmarkError(f"watch answered {response.status}")
            opened += 1
            if opened == watchers:
                all_open.set()
            rest = b""
            while data := await response.content.readany():
                now = time.monotonic_ns()
                found, rest = probes(rest, data)
                for seq, sent in found:
                    seen.append((seq, sent, now))
                if found and len(seen) >= events:
                    done[index].set()

    answered: dict[int, int] = {}

    async def create(seq: int) -> None:
        sent = time.monotonic_ns()
        body = json.dumps(workflowrun(f"probe-{seq:06d}", annotations={PROBE: f"{seq}:{sent}"}))
        try:
            async with writer.post(
                list_url, data=body.encode(), headers={"Content-Type": "application/json"}
            ) as response:
                await response.read()
                ok = response.status == 201
        except aiohttp.ClientError:
            ok = False
        answered[seq] = time.monotonic_ns()
        stats.create_latencies.append((answered[seq] - sent) / 1e9)
        if not ok:
            stats.create_errors += 1

    async with https_session(context, pool=0) as session:
        tasks = [asyncio.create_task(watcher(i, session)) for i in range(watchers)]
        try:
            async with asyncio.timeout(60):
                waiting = asyncio.create_task(all_open.wait())
                finished, _ = await asyncio.wait(
                    [waiting, *tasks], return_when=asyncio.FIRST_COMPLETED
                )
                if waiting not in finished:
                    waiting.cancel()
                    raise BenchmarkError(f"a watcher ended while opening: {_first_error(tasks)}")
            start = time.monotonic()
            cpu_before = cpu_seconds(), cpu_seconds(server_pid) if server_pid else 0.0
            creates = []
            for seq in range(events):
                delay = start + seq / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # pacing the open-loop writer
                creates.append(asyncio.create_task(create(seq)))
            await asyncio.gather(*creates)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settle_timeout):
                    await asyncio.gather(*(d.wait() for d in done))
            stats.elapsed = time.monotonic() - start
            stats.generator_cpu = cpu_seconds() - cpu_before[0]
            if server_pid:
                stats.server_cpu = cpu_seconds(server_pid) - cpu_before[1]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    for seen in received:
        sequences = {seq for seq, _, _ in seen}
        stats.delivered += len(sequences)
        stats.complete_watchers += len(sequences) == events
        for seq, sent, now in seen:
            stats.delays_since_send.append((now - sent) / 1e9)
            if seq in answered:
                stats.delays_since_answer.append((now - answered[seq]) / 1e9)
    return stats


def _first_error(tasks: Sequence[asyncio.Task[None]]) -> str:
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            return repr(task.exception())
    return "unknown"
