"""Every `web.AppKey` of the runner app, in one place, typed."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import web

from plnt.runner import executing, guarding, metrics, settings, step_cache, subworkflows
from plnt.workflowspec import model, templating


@dataclass
class Readiness:
    """Flipped by the cleanup context: ready once clients exist, not ready while stopping."""

    ready: bool = False


SETTINGS = web.AppKey("settings", settings.RunnerSettings)
WORKFLOW = web.AppKey("workflow", model.Workflow)
COMPILED = web.AppKey("compiled", templating.CompiledWorkflow)
LIBRARY = web.AppKey("library", subworkflows.Library)
METRICS = web.AppKey("metrics", metrics.RunnerMetrics)
CACHE = web.AppKey("cache", step_cache.StepCache)
READINESS = web.AppKey("readiness", Readiness)
SESSION = web.AppKey("session", aiohttp.ClientSession)
EXECUTOR = web.AppKey("executor", executing.Executor)
GUARD = web.AppKey("guard", guarding.GuardedBackend)
