"""The AppKeys of Invocation's runtime (set by its install, `install.INSTALL`, read by its
store's hooks and contexts)."""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver.invocations import metering, starting

HOOKS = web.AppKey("invocation_hooks", starting.InvocationHooks)
"""Present only with a control that starts Invocations (a server with sagas)."""
METER = web.AppKey("invocation_meter", metering.FinishMeter)
"""Counts Invocations as they finish (always present)."""
