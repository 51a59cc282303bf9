"""Every aiohttp AppKey of the API server, in one place (aiohttp's typed-key advice)."""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver import authn, authz, metrics
from plnt.apiserver.settings import ServerSettings
from plnt.registry.events import EventRecorder
from plnt.registry.store import ResourceStore
from plnt.storage.interface import Store

SETTINGS = web.AppKey("settings", ServerSettings)
STORAGE = web.AppKey("storage", Store)  # type: ignore[type-abstract]
STORES = web.AppKey("stores", dict[tuple[str, str], ResourceStore])
RECORDER = web.AppKey("recorder", EventRecorder)
AUTHENTICATOR = web.AppKey("authenticator", authn.Authenticator)  # type: ignore[type-abstract]
AUTHORIZER = web.AppKey("authorizer", authz.Authorizer)  # type: ignore[type-abstract]
METRICS = web.AppKey("metrics", metrics.Metrics)
READY = web.AppKey("ready", dict[str, bool])
