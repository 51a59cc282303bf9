"""The API server benchmark's server child: plnt's app and a bare HTTPS handler, one process.

    python -m plnt.bench.apiserver_serving --etcd URL --pki-dir DIR --port N --bare-port N \
        [--cprofile FILE] [--workers N]

It runs `plnt.apiserver.app.build_app` with the watch cache, served as `plnt up` serves
it: by the one serve sequence, `plnt.apiserver.serving.serve` (HTTPS with plnt's PKI, no
access log, idle connections bounded), in a process of its own so that it shares
neither an event loop nor a GIL with the load generator. On a second port, with the
same TLS context, it serves the ceiling: a handler that returns a fixed WorkflowRun-sized
body (GET) or echoes the posted body with a new uid (POST). It prints
`bench-server ready pid=N` once both listen, and exits on SIGINT/SIGTERM or when its
stdin closes, so it never outlives the benchmark that holds that pipe.

With `--workers N` (N > 1) plnt's port is shared (`SO_REUSEPORT`) by N API processes, as
`plnt up --workers N` serves it: this one and N-1 siblings, copies of this module that
serve plnt alone, started, watched and stopped by the serve sequence
(`plnt.processes.apiprocesses`; each exits with this one); the ready line comes once
every sibling listens. The bare handler stays single.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import signal
import ssl
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from plnt.api import names
from plnt.apiserver import app as app_module
from plnt.apiserver import serving
from plnt.apiserver.settings import ServerSettings
from plnt.bench import apiserver as harness
from plnt.processes import apiprocesses, tasks

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
    api_processes: int = 1,
) -> None:
    """Serve plnt on `port` and the bare handler on `bare_port` until told to stop."""
    slot = apiprocesses.Slot.from_environment()  # set in a sibling this process started
    if slot is None and api_processes > 1:
        slot = apiprocesses.first(api_processes, pki_dir.parent / "workers")
    settings = ServerSettings(
        etcd_endpoints=(etcd,), host="127.0.0.1", port=port, pki_dir=pki_dir, slot=slot
    )
    application = app_module.build_app(settings)
    ssl_context = app_module.ssl_context_for(settings)
    first = slot is None or not slot.is_sibling
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    profile = cProfile.Profile() if cprofile is not None else None

    async def announce(server: str, parts: contextlib.AsyncExitStack) -> None:
        """The bare handler beside plnt, then the ready line, then the profile starts."""
        if not first:
            return
        await parts.enter_async_context(_bare(bare_port, ssl_context))
        print(f"{READY} pid={os.getpid()}", flush=True)
        if profile is not None:  # serving only: disabled before anything stops
            profile.enable()
            parts.callback(profile.disable)

    try:
        async with contextlib.AsyncExitStack() as stack:
            if first:  # The parent holds our stdin: EOF means it is gone, so never outlive it.
                await stack.enter_async_context(tasks.running(_watch_stdin(stop), name="stdin"))
            await serving.serve(
                application,
                host="127.0.0.1",
                port=port,
                ssl_context=ssl_context,
                shutdown_timeout=2.0,
                handler_cancellation=True,
                stop=stop,
                sibling_argv=_sibling_argv(etcd, pki_dir, port),
                ready=announce,
            )
    finally:
        if profile is not None:
            profile.disable()  # again, in case serving ended by an error
            profile.dump_stats(str(cprofile))


def _sibling_argv(etcd: str, pki_dir: Path, port: int) -> list[str]:
    """This module again, serving plnt alone on the shared port."""
    return [
        sys.executable, "-m", "plnt.bench.apiserver_serving", "--etcd", etcd,
        "--pki-dir", str(pki_dir), "--port", str(port), "--bare-port", "0",
    ]  # fmt: skip


async def _watch_stdin(stop: asyncio.Event) -> None:
    """Set `stop` once stdin closes (the benchmark that holds the pipe is gone)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()
    stop.set()


@contextlib.asynccontextmanager
async def _bare(port: int, ssl_context: ssl.SSLContext) -> AsyncIterator[None]:
    """The bare handler on `port` while the block runs (one process: never `SO_REUSEPORT`)."""
    runner = web.AppRunner(
        bare_app(), shutdown_timeout=2.0, access_log=None, handler_cancellation=True
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()
        yield
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--etcd", required=True, help="etcd client URL")
    parser.add_argument("--pki-dir", type=Path, required=True, help="plnt's PKI directory")
    parser.add_argument("--port", type=int, required=True, help="plnt's HTTPS port")
    parser.add_argument("--bare-port", type=int, required=True, help="the bare handler's port")
    parser.add_argument("--cprofile", type=Path, help="cProfile this process into FILE")
    parser.add_argument("--workers", type=int, default=1, help="processes sharing --port")
    args = parser.parse_args()
    slot = apiprocesses.Slot.from_environment()
    if slot is not None:
        apiprocesses.die_with_parent(slot.parent)
    asyncio.run(
        serve(
            etcd=args.etcd,
            pki_dir=args.pki_dir,
            port=args.port,
            bare_port=args.bare_port,
            cprofile=args.cprofile,
            api_processes=args.workers,
        )
    )


if __name__ == "__main__":
    main()
