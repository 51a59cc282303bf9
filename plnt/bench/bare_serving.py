"""The API server benchmark's floor: a bare aiohttp HTTPS handler in a process of its own.

    python -m plnt.bench.bare_serving --pki-dir DIR --port N

Why its own process: served beside plnt in plnt's process, the handler shared an event
loop, a heap and a GIL with plnt's background work (the watch cache, etcd's watch
stream, timers, the garbage collector walking plnt's objects), so its CPU per request
was plnt's idle cost plus HTTP's. Here it pays for HTTP alone, under the conditions
plnt's server has: the TLS context `plnt.apiserver.app.ssl_context_for` builds from the
same PKI (client certificates requested, not required), keep-alive, no access log,
handler cancellation, and the event loop plnt's server runs on (`plnt.processes.eventloops`:
uvloop unless `PLNT_EVENT_LOOP` says otherwise).

GET `/bare/{name}` answers a fixed WorkflowRun-sized body; POST `/bare` echoes the posted
body with a new uid. It prints `bare-server ready pid=N` once it listens, and exits on
SIGINT/SIGTERM or when its stdin closes, so it never outlives the benchmark holding it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from pathlib import Path

from aiohttp import web

from plnt.api import names
from plnt.apiserver import app as app_module
from plnt.apiserver.settings import ServerSettings
from plnt.bench import apiserver as harness
from plnt.bench import local_serving
from plnt.processes import signals, tasks

READY = "bare-server ready"
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
    """The floor: same TLS, same client, a handler that does almost nothing."""

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


async def serve(*, pki_dir: Path, port: int, stop: asyncio.Event) -> None:
    """Serve the bare handler on 127.0.0.1:`port` until `stop` is set (SIGINT, SIGTERM) or
    stdin closes."""
    ssl_context = app_module.ssl_context_for(ServerSettings(pki_dir=pki_dir))
    runner = web.AppRunner(
        bare_app(), shutdown_timeout=2.0, access_log=None, handler_cancellation=True
    )
    await runner.setup()
    try:
        async with tasks.running(local_serving.watch_stdin(stop), name="stdin"):
            await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()
            print(f"{READY} pid={os.getpid()}", flush=True)
            await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--pki-dir", type=Path, required=True, help="plnt's PKI directory")
    parser.add_argument("--port", type=int, required=True, help="the HTTPS port")
    args = parser.parse_args()
    signals.run_until_signalled(lambda stop: serve(pki_dir=args.pki_dir, port=args.port, stop=stop))


if __name__ == "__main__":
    main()
