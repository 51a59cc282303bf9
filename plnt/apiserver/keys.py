"""Every aiohttp AppKey of the API server, in one place (aiohttp's typed-key advice)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from plnt.apiserver import authn, authz
from plnt.apiserver.metrics import Metrics
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.settings import ServerSettings
from plnt.registry.events import EventRecorder
from plnt.registry.store import ResourceStore
from plnt.storage.interface import Store

SETTINGS = web.AppKey("settings", ServerSettings)
STORAGE = web.AppKey("storage", Store)
STORES = web.AppKey("stores", dict[tuple[str, str], ResourceStore])
RECORDER = web.AppKey("recorder", EventRecorder)
AUTHENTICATOR = web.AppKey("authenticator", authn.Authenticator)
AUTHORIZER = web.AppKey("authorizer", authz.Authorizer)
METRICS = web.AppKey("metrics", Metrics)
READY: web.AppKey[dict[str, bool]] = web.AppKey("ready")


@dataclass
class OpenWatches:
    """Handler tasks streaming a watch; cancelled at shutdown so the server never waits on them."""

    tasks: set[asyncio.Task[Any]] = field(default_factory=set)


WATCHES = web.AppKey("watches", OpenWatches)

# Per-request storage, set by the middleware chain.
REQUEST_INFO = web.RequestKey("request_info", RequestInfo)
USER = web.RequestKey("user", authn.UserInfo)
