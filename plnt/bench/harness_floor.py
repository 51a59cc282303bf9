"""The bare-aiohttp floor of the harness benchmark: `python -m plnt.bench.harness_floor`.

One aiohttp handler that reads the body and answers the echo runner's answer as fixed
bytes, with the same `Server-Timing` header: everything a runner does is left out except
HTTP itself, so the generator parses the same answer and what remains is the cheapest
server aiohttp can be, on the event loop the runner runs on (`plnt.processes.signals.
run_until_signalled`: uvloop unless `PLNT_EVENT_LOOP` says otherwise). Prints `harness
floor listening on URL` when it serves, and stops on SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from aiohttp import web

from plnt.api.headers import CACHE_HEADER, CacheOutcome
from plnt.processes import signals

ANSWER = (
    b'{"workflow": {"name": "echo", "version": null}, "output": {"seq": 1},'
    b' "trace": [{"id": "echo", "kind": "transform", "startedMs": 0.05, "finishedMs": 0.2,'
    b' "durationMs": 0.15, "backendMs": 0.0, "attempts": 1, "cache": "off"}],'
    b' "cache": {"hits": 0, "misses": 0, "entries": 0, "maxEntries": 1024,'
    b' "ttlSeconds": 600.0, "totalHits": 0, "totalMisses": 0},'
    b' "timings": {"totalMs": 0.4, "runnerMs": 0.4, "backendMs": 0.0}}'
)
HEADERS = {"Server-Timing": "runner;dur=0.400, backend;dur=0.000", CACHE_HEADER: CacheOutcome.OFF}


async def invoke(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json", headers=HEADERS)


async def serve(port: int, stop: asyncio.Event) -> None:
    app = web.Application()
    app.router.add_post("/invoke", invoke)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        host, bound = runner.addresses[0][:2]
        print(f"harness floor listening on http://{host}:{bound}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plnt.bench.harness_floor")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    signals.run_until_signalled(lambda stop: serve(args.port, stop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
