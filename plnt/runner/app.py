"""The composition root of the runner: `build_app(settings)` and nothing else builds one.

The spec (with the workflows it calls, when the revision bundles them:
`plnt.runner.subworkflows`) is loaded and compiled here, before the app exists, so every spec error
(`plnt.workflowspec.documents.SpecError`) and backend configuration error surfaces at
start-up, never at invoke time. Clients (the aiohttp session shared by the OpenAI-compatible
backend and HTTP steps) live in a cleanup context: created on start-up, closed on shutdown.
The backend is always called through its guard (`plnt.runner.guarding`: admission, breaker,
deadline, retry budget, fallback), which the executor and `/metrics` share.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from plnt.api import breakers as api_breakers
from plnt.runner import (
    chat_completions,
    executing,
    guarding,
    handlers,
    keys,
    metrics,
    responses,
    settings,
    spilling,
    step_cache,
    subworkflows,
    text_completions,
)
from plnt.workflowspec import dag, documents


def build_app(runner_settings: settings.RunnerSettings) -> web.Application:
    """The runner app for one spec file and one backend; raises on an invalid spec."""
    workflow, compiled, library = subworkflows.load(_read_spec(runner_settings))
    executing.require_models(workflow, runner_settings.backend)
    app = web.Application(
        client_max_size=runner_settings.max_body_bytes,
        middlewares=[responses.errors_as_json, handlers.call_context],
    )
    app[keys.SETTINGS] = runner_settings
    app[keys.WORKFLOW] = workflow
    app[keys.COMPILED] = compiled
    app[keys.LIBRARY] = library
    app[keys.METRICS] = metrics.RunnerMetrics()
    app[keys.CACHE] = step_cache.StepCache(
        max_entries=runner_settings.cache_max_entries,
        ttl_seconds=runner_settings.cache_ttl_seconds,
    )
    app[keys.READINESS] = keys.Readiness()
    spilling.install(app, runner_settings.backend)
    app.cleanup_ctx.append(_clients)
    app.router.add_post("/invoke", handlers.invoke)
    app.router.add_post("/v1/chat/completions", chat_completions.chat_completions)
    app.router.add_post("/v1/completions", text_completions.completions)
    app.router.add_get("/v1/models", chat_completions.models)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    app.router.add_get("/metrics", handlers.metrics)
    app.router.add_get(api_breakers.RUNNER_PATH, handlers.breakers)
    return app


def _read_spec(runner_settings: settings.RunnerSettings) -> bytes:
    try:
        return runner_settings.spec_path.read_bytes()
    except OSError as error:
        raise documents.SpecError(
            [dag.Problem(str(runner_settings.spec_path), f"cannot read: {error}")]
        ) from error


async def _clients(app: web.Application) -> AsyncIterator[None]:
    runner_settings = app[keys.SETTINGS]
    session = aiohttp.ClientSession()
    app[keys.SESSION] = session
    config = runner_settings.backend
    guarded = app[keys.GUARD] = guarding.guard(config, session=session, metrics=app[keys.METRICS])
    app[keys.EXECUTOR] = executing.Executor(
        app[keys.WORKFLOW],
        app[keys.COMPILED],
        backend=guarded,
        backend_config=config,
        session=session,
        cache=app[keys.CACHE],
        metrics=app[keys.METRICS],
        may_retry=guarded.may_retry,
        library=app[keys.LIBRARY],
    )
    app[keys.READINESS].ready = True
    try:
        yield
    finally:
        app[keys.READINESS].ready = False
        await session.close()
