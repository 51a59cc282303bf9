"""API server benchmark: plnt over HTTPS against raw etcd (and a bare HTTPS handler), one run.

    python bench/apiserver.py [--quick] [--concurrency 30] [...]

Three processes share the machine: etcd (a child, same defaults as `plnt up`),
the API server (a child: this file with `--serve`), and this process, which
generates the load. The server runs in its own process so that it does not
share an event loop and a GIL with the load generator, as it would not in
production. The server child also serves a bare aiohttp HTTPS handler on a
second port (same TLS context, fixed JSON body), idle while plnt is measured.

Raw etcd is measured through the same `EtcdStore` client the server uses, on
the same etcd, at the same concurrency. See bench/README.md for what each
number means. Every child is stopped and reaped, also on failure or Ctrl-C.
Misses of a target are printed, never turned into a non-zero exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from aiohttp import web

from plnt.apiserver import app as app_module
from plnt.apiserver import pki
from plnt.apiserver.settings import ServerSettings
from plnt.bench import apiserver as harness
from plnt.bench import children
from plnt.processes.etcd import EtcdProcess
from plnt.processes.ports import free_port
from plnt.storage.etcd import EtcdStore

LIST_NS = "bench-list"
CREATE_NS = "bench-create"
WATCH_NS = "bench-watch"
RAW_CREATE_PREFIX = "/bench-raw/creates/"
READY = "bench-server ready"
SCRIPT = str(Path(__file__).resolve())


# -- the server child ---------------------------------------------------------------------

BARE_OBJECT = json.dumps(
    {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "generation": 1,
            "name": "obj-000001",
            "namespace": LIST_NS,
            "resourceVersion": "12345",
            "uid": str(uuid.UUID(int=1)),
        },
        "spec": harness.workflowrun("x")["spec"],
    },
    separators=(",", ":"),
).encode()


def bare_app() -> web.Application:
    """The ceiling: same TLS, same client, a handler that does almost nothing."""

    async def get(request: web.Request) -> web.Response:
        return web.Response(body=BARE_OBJECT, content_type="application/json")

    async def post(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        body["metadata"]["uid"] = str(uuid.uuid4())
        return web.Response(
            body=json.dumps(body, separators=(",", ":")).encode(),
            status=201,
            content_type="application/json",
        )

    app = web.Application()
    app.router.add_get("/bare/{name}", get)
    app.router.add_post("/bare", post)
    return app


async def serve_child(args: argparse.Namespace) -> None:
    settings = ServerSettings(
        etcd_endpoints=(args.etcd,),
        host="127.0.0.1",
        port=args.port,
        pki_dir=Path(args.pki_dir),
    )
    application = app_module.build_app(settings)
    ssl_context = app_module.ssl_context_for(settings)
    runners = [
        web.AppRunner(
            application, shutdown_timeout=2.0, access_log=None, handler_cancellation=True
        ),
        web.AppRunner(bare_app(), shutdown_timeout=2.0, access_log=None, handler_cancellation=True),
    ]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # The parent holds our stdin: EOF means it is gone, so never outlive it.
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def watch_parent() -> None:
        await reader.read()
        stop.set()

    parent = asyncio.create_task(watch_parent())
    profile = cProfile.Profile() if args.cprofile else None
    try:
        for runner, port in zip(runners, (args.port, args.bare_port), strict=True):
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()  # type: ignore[arg-type]
        print(f"{READY} pid={os.getpid()}", flush=True)
        if profile is not None:
            profile.enable()
        await stop.wait()
    finally:
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.cprofile)
        parent.cancel()
        for runner in runners:
            await runner.cleanup()


# -- the load generator -------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_server(
    etcd: EtcdProcess, pki_dir: Path, *, cprofile: str | None, start_timeout: float = 60.0
) -> AsyncIterator[tuple[children.Child, int, int]]:
    port, bare_port = free_port(), free_port()
    command = [
        sys.executable, SCRIPT, "--serve", "--etcd", etcd.endpoint,
        "--pki-dir", str(pki_dir), "--port", str(port), "--bare-port", str(bare_port),
    ]  # fmt: skip
    if cprofile:
        command += ["--cprofile", cprofile]
    async with children.running_child(
        command,
        ready=READY,
        what="the server",
        start_timeout=start_timeout,
        stop_timeout=20,
        hold_stdin=True,
    ) as child:
        yield child, port, bare_port


@contextlib.contextmanager
def py_spy(pid: int, output: str | None) -> Iterator[None]:
    """Record the server with py-spy while the block runs (optional).

    The format follows `output`'s suffix: .txt collapsed stacks, .svg a flame
    graph, anything else speedscope JSON.
    """
    if not output:
        yield
        return
    binary = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    kind = {".txt": "raw", ".svg": "flamegraph"}.get(Path(output).suffix, "speedscope")
    proc = subprocess.Popen(
        [binary, "record", "--pid", str(pid), "--output", output, "--format", kind],
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


@dataclass
class Results:
    raw: dict[str, harness.PhaseStats] = field(default_factory=dict)
    bare: dict[str, harness.PhaseStats] = field(default_factory=dict)
    api: dict[str, harness.PhaseStats] = field(default_factory=dict)
    watch: harness.WatchStats | None = None


async def preload(
    raw: EtcdStore, session: aiohttp.ClientSession, base: str, args: argparse.Namespace
) -> bytes:
    """Create one object through the API, clone it raw into `objects` keys; return its bytes."""
    url = base + harness.resource_path(LIST_NS)
    async with session.post(url, json=harness.workflowrun("obj-000000")) as response:
        created = json.loads(await response.read())
        if response.status != 201:
            raise harness.BenchError(f"template create answered {response.status}: {created}")
    del created["metadata"]["resourceVersion"]

    def stored(index: int) -> bytes:
        created["metadata"]["name"] = f"obj-{index:06d}"
        created["metadata"]["uid"] = str(uuid.uuid4())
        return json.dumps(created, separators=(",", ":"), sort_keys=True).encode()

    template = stored(0)
    values = [stored(i) for i in range(args.objects)]

    async def put(seq: int) -> bool:
        if seq == 0 or seq >= args.objects:
            return True
        await raw.create(f"/plnt.work/workflowruns/{LIST_NS}/obj-{seq:06d}", values[seq])
        return True

    await harness.run_closed_loop(
        put, concurrency=args.concurrency, duration=0.0, min_ops=args.objects
    )
    await harness.wait_for_count(session, url, count=args.objects, within=60)
    return template


async def measure(
    run: Callable[[int], Awaitable[bool]],
    args: argparse.Namespace,
    *,
    duration: float | None = None,
) -> harness.PhaseStats:
    """A warm-up (its sequence numbers far above the measured ones), then the closed loop."""
    await harness.run_closed_loop(
        lambda seq: run(seq + (1 << 40)), concurrency=args.concurrency, duration=args.warmup
    )
    return await harness.run_closed_loop(
        run,
        concurrency=args.concurrency,
        duration=duration if duration is not None else args.duration,
    )


async def bench(args: argparse.Namespace, workdir: Path) -> Results:
    results = Results()
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    etcd_options = {"unsafe_no_fsync": True} if args.no_fsync else {}
    async with (
        EtcdProcess(workdir / "etcd", **etcd_options) as etcd,  # type: ignore[arg-type]
        EtcdStore(etcd.endpoint, key_prefix="/registry") as raw,
        running_server(etcd, workdir / "pki", cprofile=args.server_cprofile) as server,
        harness.https_session(context, pool=args.concurrency) as session,
    ):
        child, port, bare_port = server
        base, bare = f"https://127.0.0.1:{port}", f"https://127.0.0.1:{bare_port}"
        print(f"etcd {etcd.endpoint} (pid {etcd.pid}); server {base} (pid {child.process.pid})")
        template = await preload(raw, session, base, args)
        names = [f"obj-{i:06d}" for i in range(args.objects)]
        keys = [f"/plnt.work/workflowruns/{LIST_NS}/{n}" for n in names]
        api_urls = [base + harness.resource_path(LIST_NS, n) for n in names]
        phases = set(args.phases.split(","))
        with py_spy(child.process.pid, args.py_spy):
            if "get" in phases:
                if not args.api_only:
                    results.raw["get"] = await measure(harness.raw_get(raw, keys), args)
                    results.bare["get"] = await measure(
                        harness.http_get(session, [f"{bare}/bare/{n}" for n in names]), args
                    )
                results.api["get"] = await measure(harness.http_get(session, api_urls), args)
            if "create" in phases:
                await create_phases(results, raw, session, base, bare, template, args)
            if "list" in phases:
                await list_phases(results, raw, session, base, args)
            if "watch" in phases:
                results.watch = await harness.watch_fanout(
                    base,
                    context,
                    session,
                    namespace=WATCH_NS,
                    watchers=args.watchers,
                    events=args.watch_events,
                    rate=args.watch_rate,
                )
    return results


async def create_phases(
    results: Results,
    raw: EtcdStore,
    session: aiohttp.ClientSession,
    base: str,
    bare: str,
    template: bytes,
    args: argparse.Namespace,
) -> None:
    if not args.api_only:
        results.raw["create"] = await measure(
            harness.raw_create(raw, RAW_CREATE_PREFIX, template), args
        )
        results.bare["create"] = await measure(
            harness.http_create(session, f"{bare}/bare", name_prefix="b-"), args
        )
    results.api["create"] = await measure(
        harness.http_create(session, base + harness.resource_path(CREATE_NS), name_prefix="c-"),
        args,
    )


async def list_phases(
    results: Results,
    raw: EtcdStore,
    session: aiohttp.ClientSession,
    base: str,
    args: argparse.Namespace,
) -> None:
    list_args = argparse.Namespace(**{**vars(args), "concurrency": args.list_concurrency})
    if not args.api_only:
        results.raw["list"] = await measure(
            harness.raw_list(raw, f"/plnt.work/workflowruns/{LIST_NS}/", page=args.page),
            list_args,
        )
    results.api["list"] = await measure(
        harness.http_list(
            session, base + harness.resource_path(LIST_NS), page=args.page, expect=args.objects
        ),
        list_args,
    )


# -- the report ---------------------------------------------------------------------------


def _ratio(api: harness.PhaseStats | None, ceiling: harness.PhaseStats | None) -> float:
    if api is None or ceiling is None or ceiling.rate == 0:
        return 0.0
    return api.rate / ceiling.rate


def _median_ms(stats: harness.PhaseStats | None) -> float:
    return stats.percentile_ms(0.5) if stats is not None else 0.0


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(results: Results, args: argparse.Namespace) -> list[str]:
    lines = [
        f"plnt API server benchmark: concurrency {args.concurrency} "
        f"(LIST {args.list_concurrency}), {args.objects} objects, pages of {args.page}, "
        f"{args.duration:g}s per phase, {os.cpu_count()} CPUs",
        f"{'phase':<12}{'raw etcd':>14}{'bare https':>14}{'plnt api':>14}"
        f"{'api p50 ms':>12}{'api p99 ms':>12}{'errors':>8}",
    ]
    for phase, unit in (("get", "/s"), ("create", "/s"), ("list", " lists/s")):
        api = results.api.get(phase)
        if api is None:
            continue
        cells = []
        for side in (results.raw, results.bare, results.api):
            stats = side.get(phase)
            cells.append(f"{stats.rate:>14.1f}" if stats else f"{'-':>14}")
        errors = sum(
            s[phase].errors for s in (results.raw, results.bare, results.api) if phase in s
        )
        lines.append(
            f"{phase.upper() + unit:<12}{''.join(cells)}"
            f"{api.percentile_ms(0.5):>12.2f}{api.percentile_ms(0.99):>12.2f}{errors:>8}"
        )
    if "list" in results.api:
        lines.append(
            f"LIST time per full list of {args.objects}: "
            f"raw {_median_ms(results.raw.get('list')):.1f} ms, "
            f"api {results.api['list'].percentile_ms(0.5):.1f} ms (median)"
        )
    if "get" in results.api:
        get_raw = _ratio(results.api["get"], results.raw.get("get"))
        lines += [
            f"ratio GET api/raw     {get_raw:6.2f}  target >= 1.00  {_verdict(get_raw >= 1.0)}",
            f"ratio GET api/bare    {_ratio(results.api['get'], results.bare.get('get')):6.2f}",
        ]
    if "create" in results.api:
        create_raw = _ratio(results.api["create"], results.raw.get("create"))
        lines += [
            f"ratio CREATE api/raw  {create_raw:6.2f}  target >= 0.50  "
            f"{_verdict(create_raw >= 0.5)}",
            f"ratio CREATE api/bare "
            f"{_ratio(results.api['create'], results.bare.get('create')):6.2f}",
        ]
    if "list" in results.api:
        lines.append(
            f"ratio LIST api/raw    {_ratio(results.api['list'], results.raw.get('list')):6.2f}"
        )
    watch = results.watch
    if watch is not None:
        p99 = harness.percentile(watch.delays_since_send, 0.99) * 1000
        ok = watch.all_delivered and p99 <= 100.0
        lines += [
            f"WATCH {watch.watchers} watchers x {watch.events} creates at {args.watch_rate:g}/s: "
            f"delivered {watch.delivered}/{watch.expected}, complete watchers "
            f"{watch.complete_watchers}/{watch.watchers}, create errors {watch.create_errors}",
            "WATCH delay since create sent: "
            f"p50 {harness.percentile(watch.delays_since_send, 0.5) * 1000:.1f} ms, "
            f"p99 {p99:.1f} ms, max {max(watch.delays_since_send, default=0) * 1000:.1f} ms; "
            "since create answered: "
            f"p50 {harness.percentile(watch.delays_since_answer, 0.5) * 1000:.1f} ms, "
            f"p99 {harness.percentile(watch.delays_since_answer, 0.99) * 1000:.1f} ms; "
            f"create p50 {harness.percentile(watch.create_latencies, 0.5) * 1000:.1f} ms",
            f"ratio WATCH p99 ms    {p99:6.1f}  target <= 100 ms, all delivered "
            f"({'yes' if watch.all_delivered else 'no'})  {_verdict(ok)}",
        ]
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small numbers, about 30 s")
    parser.add_argument("--concurrency", type=int, default=30)
    parser.add_argument(
        "--list-concurrency",
        type=int,
        default=None,
        help="concurrent full lists (default 1: time per list)",
    )
    parser.add_argument("--objects", type=int, default=None, help="objects to list (10000)")
    parser.add_argument("--page", type=int, default=500)
    parser.add_argument("--duration", type=float, default=None, help="seconds per phase (5)")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before each (1)")
    parser.add_argument("--watchers", type=int, default=None, help="watchers (200)")
    parser.add_argument("--watch-events", type=int, default=None, help="creates watched (500)")
    parser.add_argument("--watch-rate", type=float, default=None, help="creates/s (100)")
    parser.add_argument(
        "--phases",
        default="get,create,list,watch",
        help="comma-separated subset of get,create,list,watch",
    )
    parser.add_argument(
        "--api-only",
        action="store_true",
        help="skip raw etcd and bare phases (for profiling the server)",
    )
    parser.add_argument("--no-fsync", action="store_true", help="etcd --unsafe-no-fsync")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--server-cprofile", help="cProfile the server into this file")
    parser.add_argument("--py-spy", help="record the server with py-spy (speedscope file)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--etcd", help=argparse.SUPPRESS)
    parser.add_argument("--pki-dir", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bare-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "objects": 2000 if quick else 10_000,
        "duration": 1.5 if quick else 5.0,
        "warmup": 0.3 if quick else 1.0,
        "watchers": 50 if quick else 200,
        "watch_events": 50 if quick else 500,
        "watch_rate": 100.0,
        "list_concurrency": 1,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def as_json(results: Results) -> dict[str, object]:
    def phase(stats: harness.PhaseStats) -> dict[str, float]:
        return {
            "rate": stats.rate,
            "ops": stats.ops,
            "errors": stats.errors,
            "p50_ms": stats.percentile_ms(0.5),
            "p99_ms": stats.percentile_ms(0.99),
        }

    out: dict[str, object] = {
        side: {name: phase(s) for name, s in getattr(results, side).items()}
        for side in ("raw", "bare", "api")
    }
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
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        asyncio.run(serve_child(args))
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-") as tmp:
        results = asyncio.run(bench(args, Path(tmp)))
    for line in report(results, args):
        print(line)
    print(f"total {time.monotonic() - started:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(as_json(results), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
