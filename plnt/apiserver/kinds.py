"""What a kind hands the server: one `KindInstall` value, from the kind's own package.

The composition root (`plnt.apiserver.app`) lists the installs, one line per kind, and
`build_app` loops over them without asking which kind it holds, as sample-apiserver
installs each kind's REST storage from the kind's package. An install says everything
the server needs from its kind: the definition (which discovery, OpenAPI, the
long-running check and the default policy are computed from), how its store is built
and with which hooks, the handlers of its own subresources, its AppKeys and metrics
(`setup`), its cleanup contexts and the streams its state is shared on between a
server's API processes. So nothing generic names a kind.

`resources.dispatch` serves every kind's main resource and the subresources that are a
part of the object (`status`: get, update and patch of that part). A kind whose
subresources do something else (run the object, relay to what it runs, answer another
type) keeps their handlers in its own package and names them in its install;
`build_app` puts every kind's into one `Subresources` table, where the dispatcher finds
a request's handler by (group, resource, subresource). A subresource whose clients are
not kube's may answer its API errors in their shape instead of a metav1.Status
(`Subresource.render_error`); the error middleware asks `Subresources.find` for the
request at hand.

No I/O here. Errors: `ValueError` at composition time for a subresource registered twice
or not declared by the kind's definition, and for a resource installed twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from plnt.api import errors
from plnt.apiserver.peers import Peers
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.hooks import Admission
from plnt.registry.installed import Served
from plnt.registry.store import ResourceStore
from plnt.sagas.control import DeployControl
from plnt.storage.interface import Store

Handler = Callable[[web.Request, ResourceStore, RequestInfo], Awaitable[web.StreamResponse]]
"""Serves one request for a subresource, given the kind's store and the request's info."""

ErrorRenderer = Callable[[errors.APIError], web.StreamResponse]
"""Answers an API error raised while serving a subresource."""

CleanupContext = Callable[[web.Application], AsyncIterator[None]]
"""An aiohttp cleanup context: what runs while the server runs, set up and torn down."""


@dataclass(frozen=True, slots=True)
class Subresource:
    """One subresource's handler, and how its errors are answered."""

    handler: Handler
    render_error: ErrorRenderer | None = None
    """None: as every API error, a metav1.Status (`responses.status_response`)."""


@dataclass(frozen=True, slots=True)
class Composing:
    """What a kind's `setup` is handed while `build_app` composes the server."""

    app: web.Application
    standalone: bool
    """True: plnt serves alone (its own PKI, policy, Namespaces); False: under a cluster."""
    sagas: DeployControl | None
    """The control of plnt's sagas the server was given (None: a server without sagas).
    Every such control deploys; a kind that needs more of it (benches, Invocations) asks
    with isinstance for the protocol it needs (`plnt.sagas.control`)."""


@dataclass(frozen=True, slots=True)
class Storing:
    """What a kind's `store` is handed when the storage context builds the server's stores
    (at start-up, once storage is ready)."""

    app: web.Application
    definition: ResourceDefinition
    storage: Store
    """The server's storage (etcd, behind the watch cache): unused by a kind that is not
    `in_etcd`."""
    admission: tuple[Admission, ...]
    """The admission other kinds ask of this one's objects (`KindInstall.admits_namespaced`)."""
    standalone: bool


def plain_store(storing: Storing) -> ResourceStore:
    """The generic store of a kind with no hooks of its own."""
    return ResourceStore(storing.definition, storing.storage, admission=storing.admission)


@dataclass(frozen=True, slots=True)
class KindInstall:
    """One kind, as its package installs it in the server (the module docstring)."""

    definition: ResourceDefinition
    standalone_only: bool = False
    """Served only by standalone plnt: under `plnt serve` the cluster serves it. Its
    `setup` still runs there (a kind may answer differently in each mode)."""
    in_etcd: bool = True
    """False: the kind keeps its objects itself (its `store` ignores `Storing.storage`),
    so the watch cache holds no prefix for it."""
    store: Callable[[Storing], ResourceStore] = plain_store
    """Builds the kind's store with its hooks (admission, after-write)."""
    admits_namespaced: Callable[[ResourceStore], Admission] | None = None
    """Given this kind's store, the admission every namespaced kind's store runs (the
    Namespace kind's NamespaceLifecycle); such a kind's store is built first."""
    subresources: Mapping[str, Subresource] = field(default_factory=dict)
    """The handlers of its own subresources by name (`status` is the generic handlers')."""
    setup: Callable[[Composing], None] | None = None
    """Sets its AppKeys, registers its metrics in `keys.METRICS`' registry and adds any
    route of its own (before the generic resource routes), while the app is composed."""
    contexts: tuple[CleanupContext, ...] = ()
    """Its cleanup contexts, run after storage is ready and in this order; each finds what
    it needs in the app (a context whose part is missing, such as sagas, does nothing)."""
    streams: Callable[[web.Application, Peers], None] | None = None
    """With `--workers N`: registers the streams on which the API processes share its state."""


def served(installs: Iterable[KindInstall], *, standalone: bool) -> Served:
    """The definitions a server with `installs` serves, in their order."""
    return Served.of(i.definition for i in installs if standalone or not i.standalone_only)


class Subresources:
    """Every registered subresource, by (group, resource, subresource)."""

    def __init__(self, installs: Iterable[KindInstall] = ()) -> None:
        self._found: dict[tuple[str, str, str], Subresource] = {}
        for kind in installs:
            d = kind.definition
            for name, subresource in kind.subresources.items():
                key = (d.group, d.plural, name)
                if d.subresource(name) is None:
                    raise ValueError(f"{d.plural}.{d.group} declares no subresource {name!r}")
                if key in self._found:
                    raise ValueError(f"{d.plural}/{name}.{d.group} is registered twice")
                self._found[key] = subresource

    def find(self, info: RequestInfo) -> Subresource | None:
        """The registered subresource the request is for, if any."""
        if not info.is_resource_request or not info.subresource:
            return None
        return self._found.get((info.api_group, info.resource, info.subresource))
