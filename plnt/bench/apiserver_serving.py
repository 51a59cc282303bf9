"""The API server benchmark's server child: plnt's app, served as `plnt up` serves it.

    python -m plnt.bench.apiserver_serving --etcd URL --pki-dir DIR --port N \
        [--token-file FILE] [--cprofile FILE] [--workers N]

It runs `plnt.apiserver.app.build_app` with the watch cache, served as `plnt up` serves
it: by the one serve sequence, `plnt.apiserver.serving.serve` (HTTPS with plnt's PKI, no
access log, idle connections bounded), in a process of its own so that it shares
neither an event loop nor a GIL with the load generator. `--token-file` authenticates
bearer tokens as `plnt up` does (a C load generator cannot present a client certificate).
The bare handler, the floor beneath it, runs in a process of its own
(`plnt.bench.bare_serving`). It prints `bench-server ready pid=N` once it listens, and
exits on SIGINT/SIGTERM or when its stdin closes, so it never outlives the benchmark
that holds that pipe.

With `--workers N` (N > 1) plnt's port is shared (`SO_REUSEPORT`) by N API processes, as
`plnt up --workers N` serves it: this one and N-1 siblings, copies of this module that
serve plnt alone, started, watched and stopped by the serve sequence
(`plnt.processes.apiprocesses`; each exits with this one); the ready line comes once
every sibling listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import sys
from pathlib import Path

from plnt.apiserver import app as app_module
from plnt.apiserver import serving
from plnt.apiserver.settings import ServerSettings
from plnt.bench import local_serving
from plnt.processes import apiprocesses, signals, tasks

READY = "bench-server ready"
LIST_NS = "bench-list"


async def serve(
    *,
    etcd: str,
    pki_dir: Path,
    port: int,
    cprofile: Path | None,
    stop: asyncio.Event,
    token_file: Path | None = None,
    api_processes: int = 1,
) -> None:
    """Serve plnt on `port` until `stop` is set (SIGINT, SIGTERM) or stdin closes."""
    slot = apiprocesses.Slot.from_environment()  # set in a sibling this process started
    if slot is None and api_processes > 1:
        slot = apiprocesses.first(api_processes, pki_dir.parent / "workers")
    settings = ServerSettings(
        etcd_endpoints=(etcd,),
        host="127.0.0.1",
        port=port,
        pki_dir=pki_dir,
        token_file=token_file,
        slot=slot,
    )
    application = app_module.build_app(settings)
    ssl_context = app_module.ssl_context_for(settings)
    first = slot is None or not slot.is_sibling
    profile = cProfile.Profile() if cprofile is not None else None

    async def announce(server: str, parts: contextlib.AsyncExitStack) -> None:
        """The ready line, then the profile starts."""
        if not first:
            return
        print(f"{READY} pid={os.getpid()}", flush=True)
        if profile is not None:  # serving only: disabled before anything stops
            profile.enable()
            parts.callback(profile.disable)

    try:
        async with contextlib.AsyncExitStack() as stack:
            if first:  # The parent holds our stdin: EOF means it is gone, so never outlive it.
                await stack.enter_async_context(
                    tasks.running(local_serving.watch_stdin(stop), name="stdin")
                )
            await serving.serve(
                application,
                host="127.0.0.1",
                port=port,
                ssl_context=ssl_context,
                shutdown_timeout=2.0,
                handler_cancellation=True,
                stop=stop,
                sibling_argv=_sibling_argv(etcd, pki_dir, port, token_file),
                ready=announce,
            )
    finally:
        if profile is not None:
            profile.disable()  # again, in case serving ended by an error
            profile.dump_stats(str(cprofile))


def _sibling_argv(etcd: str, pki_dir: Path, port: int, token_file: Path | None) -> list[str]:
    """This module again, serving plnt on the shared port."""
    argv = [
        sys.executable, "-m", "plnt.bench.apiserver_serving", "--etcd", etcd,
        "--pki-dir", str(pki_dir), "--port", str(port),
    ]  # fmt: skip
    return argv + (["--token-file", str(token_file)] if token_file is not None else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--etcd", required=True, help="etcd client URL")
    parser.add_argument("--pki-dir", type=Path, required=True, help="plnt's PKI directory")
    parser.add_argument("--port", type=int, required=True, help="plnt's HTTPS port")
    parser.add_argument("--token-file", type=Path, help="bearer tokens, as plnt up's")
    parser.add_argument("--cprofile", type=Path, help="cProfile this process into FILE")
    parser.add_argument("--workers", type=int, default=1, help="processes sharing --port")
    args = parser.parse_args()
    slot = apiprocesses.Slot.from_environment()
    if slot is not None:
        apiprocesses.die_with_parent(slot.parent)
    signals.run_until_signalled(
        lambda stop: serve(
            etcd=args.etcd,
            pki_dir=args.pki_dir,
            port=args.port,
            token_file=args.token_file,
            cprofile=args.cprofile,
            stop=stop,
            api_processes=args.workers,
        )
    )


if __name__ == "__main__":
    main()
