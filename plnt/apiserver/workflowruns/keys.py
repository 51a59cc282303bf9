"""The AppKeys of WorkflowRun's runtime, beside the server's own (`plnt.apiserver.keys`).

They are set by this package's cleanup contexts and by the composition root
(`plnt.apiserver.app`), and read only by this package's handlers.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from plnt.apiserver.workflowruns import deployhooks, latency, shadowing, traffic

DEPLOY_HOOKS = web.AppKey("deploy_hooks", deployhooks.DeployHooks)
"""Present only with a DeployControl."""
INVOKER = web.AppKey("invoker", traffic.Invoker)
UPSTREAM = web.AppKey("upstream", aiohttp.ClientSession)
"""The one client session to runners (connection pooling), open while the app runs."""
SHADOWER = web.AppKey("shadower", shadowing.Shadower)
"""Mirrored calls to a canary under shadow, and the pairs they left (`shadowing.context`)."""
LATENCY = web.AppKey("latency", latency.RunLatency)
"""The per-run histograms of calls through invoke and proxy (`invoke.upstream_context`)."""
