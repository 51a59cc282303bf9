"""One API server benchmark run: its children, the preload, and every phase on each side.

Four processes share the machine: etcd (a `plnt.processes.etcd.EtcdProcess`, the
settings `plnt up` uses), the API server (`plnt.bench.apiserver_serving`, a child), the
bare handler (`plnt.bench.bare_serving`, a child) and this process, which generates the
load. Raw etcd is measured through the same `EtcdStore` client the server uses, on the
same etcd, at the same concurrency. The `wrk` phase adds a C client (`plnt.bench.wrk`)
against etcd's HTTP gateway, the bare handler and plnt (with a bearer token). Every
child is stopped and reaped on the way out, also on failure or Ctrl-C.

Errors: `harness.BenchmarkError` (or `children.ChildFailed`) when a child or a phase
cannot run at all; slow results are reported, never raised.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from plnt.apiserver import authn, pki
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_serving as serving
from plnt.bench import bare_serving, children, consistent_reads, cputime, wrk
from plnt.bench.apiserver_report import BARE, ETCD, GENERATOR, SERVER, Results
from plnt.bench.settings import ApiBenchmarkSettings
from plnt.processes import eventloops
from plnt.processes.etcd import EtcdProcess
from plnt.processes.ports import free_port
from plnt.storage.etcd import EtcdStore

LIST_NS = serving.LIST_NS
CREATE_NS = "bench-create"
WATCH_NS = "bench-watch"
RAW_CREATE_PREFIX = "/bench-raw/creates/"
WARMUP_SEQ_OFFSET = 1 << 40  # warm-up sequence numbers never collide with measured ones


@dataclass(frozen=True, slots=True)
class Server:
    """The server child, the bare handler's child, their HTTPS base URLs, and a bearer
    token the server accepts as an administrator (for wrk, which has no client certificate)."""

    child: children.Child
    bare_child: children.Child
    base: str
    bare: str
    token: str


@contextlib.asynccontextmanager
async def running_server(
    etcd: EtcdProcess,
    pki_dir: Path,
    *,
    cprofile: Path | None,
    api_processes: int = 1,
    start_timeout: float = 60.0,
) -> AsyncIterator[Server]:
    """`plnt.bench.apiserver_serving` against `etcd` (`api_processes` processes sharing
    plnt's port) and `plnt.bench.bare_serving` beside it, until the block ends."""
    port, bare_port = free_port(), free_port()
    token = secrets.token_urlsafe(32)
    token_file = pki_dir.parent / "tokens.csv"
    authn.add_token(token_file, token=token, user="bench-admin", groups=[pki.ADMIN_GROUP])
    command = [
        sys.executable, "-m", serving.__name__, "--etcd", etcd.endpoint,
        "--pki-dir", str(pki_dir), "--port", str(port), "--token-file", str(token_file),
        "--workers", str(api_processes),
    ]  # fmt: skip
    if cprofile is not None:
        command += ["--cprofile", str(cprofile)]
    bare_command = [
        sys.executable, "-m", bare_serving.__name__, "--pki-dir", str(pki_dir),
        "--port", str(bare_port),
    ]  # fmt: skip
    async with (
        children.running_child(
            command,
            ready=serving.READY,
            what="the server",
            start_timeout=start_timeout,
            stop_timeout=20,
            hold_stdin=True,
        ) as child,
        children.running_child(
            bare_command,
            ready=bare_serving.READY,
            what="the bare handler",
            start_timeout=start_timeout,
            stop_timeout=20,
            hold_stdin=True,
        ) as bare_child,
    ):
        yield Server(
            child, bare_child, f"https://127.0.0.1:{port}", f"https://127.0.0.1:{bare_port}", token
        )


def py_spy_binary() -> str | None:
    """py-spy beside this Python (a venv's), else on PATH; None when it is not installed."""
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


@contextlib.contextmanager
def py_spy(pid: int, output: Path | None) -> Iterator[None]:
    """Record the server with py-spy while the block runs (optional).

    The format follows `output`'s suffix: .txt collapsed stacks, .svg a flame
    graph, anything else speedscope JSON.
    """
    if output is None:
        yield
        return
    binary = py_spy_binary()
    if binary is None:
        raise FileNotFoundError("py-spy is not installed: pip install py-spy")
    kind = {".txt": "raw", ".svg": "flamegraph"}.get(output.suffix, "speedscope")
    proc = subprocess.Popen(
        [binary, "record", "--pid", str(pid), "--output", str(output), "--format", kind],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def create_namespaces(session: aiohttp.ClientSession, base: str) -> None:
    """The benchmark's namespaces: a standalone server refuses objects in missing ones."""
    for name in (LIST_NS, CREATE_NS, WATCH_NS):
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        async with session.post(f"{base}/api/v1/namespaces", json=body) as response:
            if response.status not in (201, 409):
                raise harness.BenchmarkError(
                    f"namespace {name} answered {response.status}: {await response.text()}"
                )


def resident_bytes(pid: int) -> int:
    """A process's resident set (`VmRSS` in /proc), in bytes; 0 where /proc has none."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # kB
    return 0


async def preload(
    raw: EtcdStore, session: aiohttp.ClientSession, base: str, settings: ApiBenchmarkSettings
) -> bytes:
    """Create one object through the API, clone it raw into `objects` keys; return its bytes."""
    url = base + harness.resource_path(LIST_NS)
    async with session.post(url, json=harness.workflowrun("obj-000000")) as response:
        created = json.loads(await response.read())
        if response.status != 201:
            raise harness.BenchmarkError(f"template create answered {response.status}: {created}")
    del created["metadata"]["resourceVersion"]

    def stored(index: int) -> bytes:
        created["metadata"]["name"] = f"obj-{index:06d}"
        created["metadata"]["uid"] = str(uuid.uuid4())
        return json.dumps(created, separators=(",", ":"), sort_keys=True).encode()

    template = stored(0)
    values = [stored(i) for i in range(settings.objects)]

    async def put(seq: int) -> bool:
        if seq == 0 or seq >= settings.objects:
            return True
        await raw.create(f"/plnt.work/workflowruns/{LIST_NS}/obj-{seq:06d}", values[seq])
        return True

    await harness.run_closed_loop(
        put, concurrency=settings.concurrency, duration=0.0, min_ops=settings.objects
    )
    await harness.wait_for_count(session, url, count=settings.objects, within=60)
    return template


async def measure(
    run: Callable[[int], Awaitable[bool]],
    *,
    concurrency: int,
    warmup: float,
    duration: float,
    meter: cputime.Meter | None = None,
) -> harness.PhaseStats:
    """A warm-up (its sequence numbers far above the measured ones), then the closed loop;
    `meter`'s CPU readings cover the closed loop only."""
    await harness.run_closed_loop(
        lambda seq: run(seq + WARMUP_SEQ_OFFSET), concurrency=concurrency, duration=warmup
    )
    return await harness.run_closed_loop(
        run, concurrency=concurrency, duration=duration, meter=meter
    )


def meter(*, server: int, etcd: int | None, bare: int | None = None) -> cputime.Meter:
    """The processes of the API server benchmark, by the names its CPU rows use: the server
    child (plnt's API server) with its sibling API processes under `--workers N`, the bare
    handler's process, etcd, and this load generator."""
    return cputime.Meter(
        [
            cputime.Watched(SERVER, server, tree=True),
            cputime.Watched(BARE, bare),
            cputime.Watched(ETCD, etcd),
            cputime.Watched(GENERATOR, os.getpid()),
        ]
    )


async def bench(
    settings: ApiBenchmarkSettings, workdir: Path, *, api_processes: int = 1
) -> Results:
    """Start etcd and the server (`api_processes` processes) under `workdir`, preload, run
    the chosen phases. With more than one process the server's CPU rows count process 0
    only."""
    results = Results()
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    async with (
        EtcdProcess(workdir / "etcd", unsafe_no_fsync=settings.no_fsync) as etcd,
        EtcdStore(etcd.endpoint, key_prefix="/registry") as raw,
        running_server(
            etcd, workdir / "pki", cprofile=settings.server_cprofile, api_processes=api_processes
        ) as server,
        harness.https_session(context, pool=settings.concurrency) as session,
    ):
        pid = server.child.process.pid
        print(
            f"etcd {etcd.endpoint} (pid {etcd.pid}); server {server.base} (pid {pid}, "
            f"{api_processes} worker{'s' if api_processes > 1 else ''}) on {eventloops.chosen()}"
        )
        await create_namespaces(session, server.base)
        results.rss_started_bytes = resident_bytes(pid)
        template = await preload(raw, session, server.base, settings)
        results.rss_loaded_bytes = resident_bytes(pid)
        watched = meter(server=pid, etcd=etcd.pid, bare=server.bare_child.process.pid)
        phases = Phases(settings, results, raw, session, server, watched, etcd.endpoint, workdir)
        with py_spy(pid, settings.py_spy):
            if "get" in settings.phases:
                await phases.get()
            if "create" in settings.phases:
                await phases.create(template)
            if "list" in settings.phases:
                await phases.list()
            if "wrk" in settings.phases:
                await phases.wrk(template)
            if "reads" in settings.phases:
                results.reads = await consistent_reads.measure_reads(
                    endpoint=etcd.endpoint,
                    raw=raw,
                    session=session,
                    list_url=server.base + harness.resource_path(LIST_NS),
                    prefix=f"/plnt.work/workflowruns/{LIST_NS}/",
                    objects=settings.objects,
                    page=settings.page,
                    measure=phases._measure,
                    list_concurrency=settings.list_concurrency,
                )
            if "watch" in settings.phases:
                results.watch = await harness.watch_fanout(
                    server.base,
                    context,
                    namespace=WATCH_NS,
                    watchers=settings.watchers,
                    events=settings.watch_events,
                    rate=settings.watch_rate,
                    server_pid=pid,
                )
    return results


@dataclass(frozen=True, slots=True)
class Phases:
    """The closed-loop phases: each side (raw etcd, bare, plnt) at the same concurrency."""

    settings: ApiBenchmarkSettings
    results: Results
    raw: EtcdStore
    session: aiohttp.ClientSession
    server: Server
    meter: cputime.Meter
    etcd_endpoint: str
    workdir: Path

    async def _measure(
        self, run: Callable[[int], Awaitable[bool]], *, concurrency: int | None = None
    ) -> harness.PhaseStats:
        s = self.settings
        return await measure(
            run,
            concurrency=concurrency if concurrency is not None else s.concurrency,
            warmup=s.warmup,
            duration=s.duration,
            meter=self.meter,
        )

    async def get(self) -> None:
        count = self.settings.get_objects or self.settings.objects
        names = [f"obj-{i:06d}" for i in range(min(count, self.settings.objects))]
        if not self.settings.api_only:
            keys = [f"/plnt.work/workflowruns/{LIST_NS}/{n}" for n in names]
            self.results.raw["get"] = await self._measure(harness.raw_get(self.raw, keys))
            self.results.bare["get"] = await self._measure(
                harness.http_get(self.session, [f"{self.server.bare}/bare/{n}" for n in names])
            )
        api_urls = [self.server.base + harness.resource_path(LIST_NS, n) for n in names]
        self.results.api["get"] = await self._measure(harness.http_get(self.session, api_urls))

    async def create(self, template: bytes) -> None:
        if not self.settings.api_only:
            self.results.raw["create"] = await self._measure(
                harness.raw_create(self.raw, RAW_CREATE_PREFIX, template)
            )
            self.results.bare["create"] = await self._measure(
                harness.http_create(self.session, f"{self.server.bare}/bare", name_prefix="b-")
            )
        self.results.api["create"] = await self._measure(
            harness.http_create(
                self.session,
                self.server.base + harness.resource_path(CREATE_NS),
                name_prefix="c-",
            )
        )

    async def list(self) -> None:
        s = self.settings
        if not s.api_only:
            self.results.raw["list"] = await self._measure(
                harness.raw_list(self.raw, f"/plnt.work/workflowruns/{LIST_NS}/", page=s.page),
                concurrency=s.list_concurrency,
            )
        self.results.api["list"] = await self._measure(
            harness.http_list(
                self.session,
                self.server.base + harness.resource_path(LIST_NS),
                page=s.page,
                expect=s.objects,
            ),
            concurrency=s.list_concurrency,
        )

    async def wrk(self, template: bytes) -> None:
        """GET and CREATE through wrk at each of `wrk_connections`: etcd's HTTP gateway
        (a range of one key, a put of the template's bytes), the bare handler and plnt
        (one object; a create with generateName), each after its own warm-up."""
        if wrk.binary() is None:
            self.results.wrk_missing = True
            return
        bearer = {"Authorization": f"Bearer {self.server.token}"}
        json_type = {"Content-Type": "application/json"}

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        key = f"/registry/plnt.work/workflowruns/{LIST_NS}/obj-000001".encode()
        put = {"key": b64(b"/registry/bench-raw/wrk-put"), "value": b64(template)}
        create = harness.workflowrun("")
        create["metadata"] = {"generateName": "w-"}
        targets = {
            "get": {
                "etcd": (
                    f"{self.etcd_endpoint}/v3/kv/range",
                    wrk.script(method="POST", body=json.dumps({"key": b64(key)}).encode()),
                ),
                "bare": (f"{self.server.bare}/bare/obj-000001", wrk.script(headers=bearer)),
                "plnt": (
                    self.server.base + harness.resource_path(LIST_NS, "obj-000001"),
                    wrk.script(headers=bearer),
                ),
            },
            "create": {
                "etcd": (
                    f"{self.etcd_endpoint}/v3/kv/put",
                    wrk.script(method="POST", body=json.dumps(put).encode()),
                ),
                "bare": (
                    f"{self.server.bare}/bare",
                    wrk.script(method="POST", body=template, headers={**bearer, **json_type}),
                ),
                "plnt": (
                    self.server.base + harness.resource_path(CREATE_NS),
                    wrk.script(
                        method="POST",
                        body=json.dumps(create).encode(),
                        headers={**bearer, **json_type},
                    ),
                ),
            },
        }
        s = self.settings
        for connections in s.wrk_connections:
            for op, sides in targets.items():
                for side, (url, lua) in sides.items():
                    phase = await wrk.measured(
                        url,
                        op=op,
                        side=side,
                        connections=connections,
                        duration=s.duration,
                        warmup=s.warmup,
                        lua=lua,
                        meter=self.meter,
                        workdir=self.workdir,
                    )
                    self.results.wrk.append(phase)
