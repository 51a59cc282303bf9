"""Serving a runner app until SIGINT/SIGTERM, and building its settings from options.

Both entry points (`python -m plnt.runner` and `plnt runner`) call `settings_from_options`
and `serve`, so they take the same options and behave the same. Once listening, one line
`plnt runner listening on http://HOST:PORT` is printed (flushed), with the real port when
`--port 0` asked for any free one — callers wait for that line instead of polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

from aiohttp import web

from plnt.processes import eventloops
from plnt.runner import app as runner_app
from plnt.runner import settings


def settings_from_options(
    spec: Path,
    *,
    backend_config: Path | None = None,
    backend_type: settings.BackendType | None = None,
    endpoint: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    latency_ms: float | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    cache_max_entries: int = 1024,
    cache_ttl_seconds: float = 600.0,
    max_body_bytes: int = 1024 * 1024,
) -> settings.RunnerSettings:
    """Settings from a backend config file, overridden field by field by flags."""
    base = (
        settings.load_backend_config(backend_config)
        if backend_config is not None
        else settings.BackendConfig()
    )
    overrides = {
        key: value
        for key, value in {
            "type": backend_type,
            "endpoint": endpoint,
            "model": model,
            "api_key_env": api_key_env,
            "latency_ms": latency_ms,
        }.items()
        if value is not None
    }
    try:
        backend = settings.BackendConfig.model_validate({**base.model_dump(), **overrides})
    except ValueError as error:
        raise settings.BackendConfigError(f"invalid backend options: {error}") from error
    return settings.RunnerSettings(
        spec_path=spec,
        backend=backend,
        host=host,
        port=port,
        cache_max_entries=cache_max_entries,
        cache_ttl_seconds=cache_ttl_seconds,
        max_body_bytes=max_body_bytes,
    )


async def serve_until_stopped(runner_settings: settings.RunnerSettings) -> None:
    """Serve until SIGINT or SIGTERM, then shut down cleanly."""
    application = runner_app.build_app(runner_settings)
    # Handlers go in before the "listening" line, so a signal right after it stops cleanly.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    # A caller that goes away cancels its handler, and so the backend calls it was making.
    runner = web.AppRunner(application, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, runner_settings.host, runner_settings.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        print(f"plnt runner listening on http://{host}:{port}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(runner_settings: settings.RunnerSettings) -> None:
    """Run `serve_until_stopped` in a fresh event loop (uvloop unless `PLNT_EVENT_LOOP`
    says otherwise or it is missing: `plnt.processes.eventloops`)."""
    with contextlib.suppress(KeyboardInterrupt):
        eventloops.run(serve_until_stopped(runner_settings))
