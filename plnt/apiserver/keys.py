"""Every aiohttp AppKey of the API server, in one place (aiohttp's typed-key advice).

A kind's runtime keeps its own keys in its package (`workflowruns.keys`, set by its
`KindInstall`), so that these name no kind.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from plnt.apiserver import authn, authz, kinds
from plnt.apiserver.metrics import Metrics
from plnt.apiserver.peers import Peers
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.settings import ServerSettings
from plnt.registry.events import EventRecorder, EventWriter
from plnt.registry.store import ResourceStore
from plnt.storage.interface import Store

SETTINGS = web.AppKey("settings", ServerSettings)
STORAGE = web.AppKey("storage", Store)
STORES = web.AppKey("stores", dict[tuple[str, str], ResourceStore])
EVENT_WRITER: web.AppKey[EventWriter | None] = web.AppKey("event_writer")
"""Where Events go in a cluster (the cluster's Events); None: plnt's own store."""
EVENT_RECORDER = web.AppKey("event_recorder", EventRecorder)
"""The recorder of the stores' transition Events (set once storage is up)."""
AUTHENTICATOR = web.AppKey("authenticator", authn.Authenticator)
AUTHORIZER = web.AppKey("authorizer", authz.Authorizer)
METRICS = web.AppKey("metrics", Metrics)
READY: web.AppKey[dict[str, bool]] = web.AppKey("ready")
SUBRESOURCES = web.AppKey("subresources", kinds.Subresources)
"""The subresource handlers the kinds registered (`build_app` hands them in)."""
PEERS = web.AppKey("peers", Peers)
"""Present only on one of several API processes (`settings.slot`): its channel to siblings."""


@dataclass
class OpenWatches:
    """Open watch streams, and the event lines they share.

    `tasks` are cancelled at shutdown so the server never waits on them. `lines`
    holds the encoded JSON line of recent plain-JSON events, keyed by event type
    and the identity of the (shared, immutable) object, so an event fanned out to
    many watchers is serialised once. Each entry keeps its object alive, so an
    id is never reused while its entry exists.
    """

    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    lines: OrderedDict[tuple[str, int], tuple[Any, bytes]] = field(default_factory=OrderedDict)
    line_cache_size: int = 4096

    def line(self, event_type: str, obj: Any, encode: Callable[[], bytes]) -> bytes:
        """The encoded line of (event_type, obj), from the cache or `encode`."""
        key = (event_type, id(obj))
        hit = self.lines.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        line = encode()
        self.lines[key] = (obj, line)
        if len(self.lines) > self.line_cache_size:
            self.lines.popitem(last=False)
        return line


WATCHES = web.AppKey("watches", OpenWatches)
CONNECTION_IDENTITIES: web.AppKey[weakref.WeakKeyDictionary[Any, authn.UserInfo | None]] = (
    web.AppKey("connection_identities")
)
"""Who a connection's client certificate says it is, while the connection lives."""

# Per-request storage, set by the request pipeline (`middleware.pipeline`).
REQUEST_INFO = web.RequestKey("request_info", RequestInfo)
USER = web.RequestKey("user", authn.UserInfo)
