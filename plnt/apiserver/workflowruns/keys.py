"""The AppKeys of WorkflowRun's runtime, beside the server's own (`plnt.apiserver.keys`).

They are set by this package's install (`install.INSTALL`: its setup and cleanup
contexts) and read only by this package's handlers and contexts. This module imports
only what the keys hold (`shadowing` does no I/O and imports no key), so every other
module of the package may import it.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from prometheus_client import Counter

from plnt.apiserver.workflowruns import deployhooks, latency, shadowing, spilling, traffic
from plnt.sagas.control import DeployControl

DEPLOY: web.AppKey[DeployControl | None] = web.AppKey("deploy")
"""The saga control, or None on a server without sagas (then no hooks, no finalizer)."""
DEPLOY_HOOKS = web.AppKey("deploy_hooks", deployhooks.DeployHooks)
"""Present only with a DeployControl."""
INVOKER = web.AppKey("invoker", traffic.Invoker)
UPSTREAM = web.AppKey("upstream", aiohttp.ClientSession)
"""The one client session to runners (connection pooling), open while the app runs."""
SHADOWER = web.AppKey("shadower", shadowing.Shadower)
"""Mirrored calls to a canary under shadow, and the pairs they left (`mirroring.context`)."""
SHADOW_DROPPED = web.AppKey("shadow_dropped", Counter)
"""`plnt_apiserver_shadow_dropped`: mirrored calls dropped because a run's queue was full."""
LATENCY = web.AppKey("latency", latency.RunLatency)
"""The per-run histograms of calls through invoke and proxy (`invoke.upstream_context`)."""
SPILLER = web.AppKey("spiller", spilling.Spiller)
"""Every run's spill state: which backend of its pool its calls go to (`slostatus.context`)."""
