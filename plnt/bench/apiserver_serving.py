"""The API server benchmark's server child: plnt's app and a bare HTTPS handler, one process.

    python -m plnt.bench.apiserver_serving --etcd URL --pki-dir DIR --port N --bare-port N \
        [--cprofile FILE] [--workers N]

It runs `plnt.apiserver.app.build_app` with the watch cache, served as `plnt up` serves
it (`web.AppRunner`, HTTPS with plnt's PKI, no access log), in a process of its own so
that it shares neither an event loop nor a GIL with the load generator. On a second
port, with the same TLS context, it serves the ceiling: a handler that returns a fixed
WorkflowRun-sized body (GET) or echoes the posted body with a new uid (POST). It prints
`bench-server ready pid=N` once both listen, and exits on SIGINT/SIGTERM or when its
stdin closes, so it never outlives the benchmark that holds that pipe.

With `--workers N` (N > 1) plnt's port is shared (`SO_REUSEPORT`) by N processes, as
`plnt up --workers N` serves it: this one and N-1 copies of this module that serve plnt
alone, started, watched and stopped by `plnt.processes.workers` (each exits with this
one); the ready line comes once every copy listens. The bare handler stays single.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import signal
import sys
import uuid
from pathlib import Path

from aiohttp import web

from plnt.api import names
from plnt.apiserver import app as app_module
from plnt.apiserver.settings import ServerSettings, WorkerSlot
from plnt.bench import apiserver as harness
from plnt.processes import workers

READY = "bench-server ready"
LIST_NS = "bench-list"

BARE_OBJECT = json.dumps(
    {
        "apiVersion": names.API_VERSION,
        "kind": names.WORKFLOWRUN_KIND,
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


async def serve(
    *,
    etcd: str,
    pki_dir: Path,
    port: int,
    bare_port: int,
    cprofile: Path | None,
    workers_count: int = 1,
) -> None:
    """Serve plnt on `port` and the bare handler on `bare_port` until told to stop."""
    slot = workers.Slot.from_environment()  # set in a copy this process started
    shared = slot is not None or workers_count > 1
    settings = ServerSettings(
        etcd_endpoints=(etcd,),
        host="127.0.0.1",
        port=port,
        pki_dir=pki_dir,
        worker=None if slot is None else WorkerSlot(slot.index, slot.count, slot.directory),
    )
    ssl_context = app_module.ssl_context_for(settings)
    served = [(app_module.build_app(settings), port, shared)]
    if slot is None:
        served.append((bare_app(), bare_port, False))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    parent: asyncio.Task[None] | None = None
    if slot is None:  # The parent holds our stdin: EOF means it is gone, so never outlive it.
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

        async def watch_parent() -> None:
            await reader.read()
            stop.set()

        parent = asyncio.create_task(watch_parent())
    profile = cProfile.Profile() if cprofile is not None else None
    runners: list[web.AppRunner] = []
    try:
        async with contextlib.AsyncExitStack() as copies:
            for app, listen, reuse_port in served:
                runner = web.AppRunner(
                    app, shutdown_timeout=2.0, access_log=None, handler_cancellation=True
                )
                runners.append(runner)
                await runner.setup()
                site = web.TCPSite(
                    runner, "127.0.0.1", listen, ssl_context=ssl_context, reuse_port=reuse_port
                )
                await site.start()
            if slot is not None:
                workers.announce_ready(slot)
            elif workers_count > 1:
                await copies.enter_async_context(
                    workers.running(_copies(etcd, pki_dir, port, workers_count))
                )
            print(f"{READY} pid={os.getpid()}", flush=True)
            if profile is not None:
                profile.enable()
            await stop.wait()
    finally:
        if profile is not None:
            profile.disable()
            profile.dump_stats(str(cprofile))
        if parent is not None:
            parent.cancel()
        for runner in runners:
            await runner.cleanup()


def _copies(etcd: str, pki_dir: Path, port: int, count: int) -> list[workers.WorkerProcess]:
    directory = workers.make_directory(pki_dir.parent / "workers")
    argv = [
        sys.executable, "-m", "plnt.bench.apiserver_serving", "--etcd", etcd,
        "--pki-dir", str(pki_dir),
        "--port", str(port), "--bare-port", "0",
    ]  # fmt: skip
    return [
        workers.WorkerProcess(argv, workers.Slot(index, count, directory, parent=os.getpid()))
        for index in range(1, count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--etcd", required=True, help="etcd client URL")
    parser.add_argument("--pki-dir", type=Path, required=True, help="plnt's PKI directory")
    parser.add_argument("--port", type=int, required=True, help="plnt's HTTPS port")
    parser.add_argument("--bare-port", type=int, required=True, help="the bare handler's port")
    parser.add_argument("--cprofile", type=Path, help="cProfile this process into FILE")
    parser.add_argument("--workers", type=int, default=1, help="processes sharing --port")
    args = parser.parse_args()
    slot = workers.Slot.from_environment()
    if slot is not None:
        workers.die_with_parent(slot.parent)
    asyncio.run(
        serve(
            etcd=args.etcd,
            pki_dir=args.pki_dir,
            port=args.port,
            bare_port=args.bare_port,
            cprofile=args.cprofile,
            workers_count=args.workers,
        )
    )


if __name__ == "__main__":
    main()
