"""The composition root: the only module that picks concrete storage, authn and authz,
and the only one that lists the kinds plnt serves (`KINDS`, one line per kind).

Each kind hands over one `kinds.KindInstall` from its own package (definition, store and
hooks, subresource handlers, AppKeys and metrics, cleanup contexts, streams); `build_app`
loops over them and never asks which kind it holds. `build_app(settings)` returns an
aiohttp application whose etcd client, watch cache and resource stores are created and
torn down in a cleanup context, so nothing lives at module level and tests can build as
many servers as they like.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from plnt.apiserver import (
    authn,
    authz,
    endpoints,
    inflight,
    keys,
    kinds,
    longrunning,
    metrics,
    middleware,
    peers,
    pki,
    resources,
    retrying,
    tlsconfig,
)
from plnt.apiserver import (
    settings as settings_module,
)
from plnt.apiserver.coreevents import install as coreevents
from plnt.apiserver.invocations import install as invocations
from plnt.apiserver.namespaces import install as namespaces
from plnt.apiserver.plntbackends import install as plntbackends
from plnt.apiserver.workflowruns import install as workflowruns
from plnt.apiserver.workflows import install as workflows
from plnt.processes import tasks
from plnt.registry import events
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.events import EventWriter
from plnt.registry.hooks import Admission
from plnt.registry.store import ResourceStore
from plnt.sagas.control import DeployControl
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import Store

log = logging.getLogger("plnt.apiserver")

KINDS: tuple[kinds.KindInstall, ...] = (
    workflowruns.INSTALL,
    plntbackends.INSTALL,
    invocations.INSTALL,
    workflows.INSTALL,
    coreevents.INSTALL,
    namespaces.INSTALL,
    namespaces.SERVICES_INSTALL,
)
"""Every kind plnt serves, in discovery order (plnt.work's, then core/v1's)."""

STANDALONE_RESOURCES: tuple[ResourceDefinition, ...] = kinds.served(
    KINDS, standalone=True
).definitions
"""Every resource standalone plnt serves (a superset of `plnt serve`'s), in discovery order."""
PLNT_RESOURCES: tuple[ResourceDefinition, ...] = kinds.served(KINDS, standalone=True).plnt
"""plnt.work's kinds, in discovery order: what the chart's RBAC must cover."""


def build_authenticator(settings: settings_module.ServerSettings) -> authn.Authenticator:
    """Request-header, client certificate and (optional) token file, in kube's order."""
    if settings.pki_dir is None:
        raise ValueError("pki_dir is required: plnt serves HTTPS only")
    paths = pki.Pki.at(settings.pki_dir)
    return authn.standard_authenticator(
        client_ca=tlsconfig.TrustBundle.from_file(paths.ca_cert),
        requestheader_ca=tlsconfig.TrustBundle.from_file(paths.front_proxy_ca_cert),
        requestheader_options=authn.RequestHeaderOptions(
            allowed_names=settings.requestheader_allowed_names
        ),
        token_file=settings.token_file,
    )


def build_authorizer(
    settings: settings_module.ServerSettings, definitions: Sequence[ResourceDefinition]
) -> authz.Authorizer:
    """The policy file's, or the default policy with the grants of `definitions`' kinds."""
    policy = authz.load_policy(settings.policy_file) if settings.policy_file else None
    return authz.standalone_authorizer(policy, definitions=definitions)


def _storage_context(
    settings: settings_module.ServerSettings,
    installs: Sequence[kinds.KindInstall],
    *,
    standalone: bool,
) -> Callable[[web.Application], AsyncIterator[None]]:
    # A kind that keeps its objects itself (the catalog's Workflows, rebuilt from their
    # sources, in memory) has no prefix in the watch cache.
    prefixes = [i.definition.key_prefix() for i in installs if i.in_etcd]

    async def context(app: web.Application) -> AsyncIterator[None]:
        ready = app[keys.READY]
        etcd = EtcdStore(
            ",".join(settings.etcd_endpoints),
            key_prefix=settings.etcd_prefix,
            observe=app[keys.METRICS].observe_etcd,
            ca_file=settings.etcd_ca_file,
            cert_file=settings.etcd_cert_file,
            key_file=settings.etcd_key_file,
        )
        await etcd.start()
        store: Store = etcd
        cache: CachedStore | None = None
        try:
            ready["etcd"] = True
            if settings.watch_cache:
                cache = CachedStore(etcd, prefixes=prefixes)
                await cache.start()
                store = cache
            ready["watch-cache"] = True
            app[keys.STORAGE] = store
            stores = _stores_of(app, installs, store, standalone=standalone)
            app[keys.STORES] = stores
            recorder = events.EventRecorder.for_stores(stores, writer=app[keys.EVENT_WRITER])
            app[keys.EVENT_RECORDER] = recorder
            async with tasks.running(recorder.run(), name="event recorder"):
                recovery = _creation_event_recovery(recorder, stores)
                recovery.start()
                try:
                    yield
                finally:
                    await recovery.close()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(5):
                            await recorder.flush()
        finally:
            if cache is not None:
                await cache.close()
            await etcd.close()

    return context


def _creation_event_recovery(
    recorder: events.EventRecorder, stores: dict[tuple[str, str], ResourceStore]
) -> retrying.RetryLoop:
    """The retry pass of creation Events (WorkflowRun's `Accepted`): at start-up, record
    those a previous process acknowledged but died before writing; later, those whose
    write failed (see docs/observability.md, "Events")."""

    async def converge() -> None:
        queued = await recorder.record_missing_creation_events(stores)
        if queued:
            log.info("recording %d creation events a previous run did not write", queued)

    async def retry() -> bool:
        await recorder.record_missing_creation_events(stores)
        await recorder.flush()
        return recorder.creation_failures == 0

    loop = retrying.RetryLoop(
        "creation events",
        converge=converge,
        retry=retry,
        pending=lambda: recorder.creation_failures > 0,
    )
    recorder.on_creation_failure = loop.wake
    return loop


def _stores_of(
    app: web.Application,
    installs: Sequence[kinds.KindInstall],
    storage: Store,
    *,
    standalone: bool,
) -> dict[tuple[str, str], ResourceStore]:
    """Every installed kind's store, in the installs' order. A kind that admits the
    namespaced ones (standalone's Namespaces: NamespaceLifecycle) is built first, and
    its admission given to every namespaced kind's store."""

    def build(install: kinds.KindInstall, admission: tuple[Admission, ...]) -> ResourceStore:
        return install.store(
            kinds.Storing(
                app=app,
                definition=install.definition,
                storage=storage,
                admission=admission,
                standalone=standalone,
            )
        )

    built: dict[tuple[str, str], ResourceStore] = {}
    namespaced: list[Admission] = []
    for install in installs:
        if install.admits_namespaced is not None:
            store = built[_key(install)] = build(install, ())
            namespaced.append(install.admits_namespaced(store))
    for install in installs:
        if _key(install) not in built:
            admission = tuple(namespaced) if install.definition.namespaced else ()
            built[_key(install)] = build(install, admission)
    return {_key(install): built[_key(install)] for install in installs}


def _key(install: kinds.KindInstall) -> tuple[str, str]:
    return (install.definition.group, install.definition.plural)


async def _close_watches(app: web.Application) -> None:
    """End every open watch at shutdown: clients re-watch, as they do after any close."""
    for task in list(app[keys.WATCHES].tasks):
        task.cancel()


@dataclass(frozen=True)
class Delegated:
    """What a cluster decides for plnt (`plnt serve`): who calls, what they may do, and
    where Events go. Without it the server is standalone: its own PKI, token file and
    policy, and Events in its own store."""

    authenticator: authn.Authenticator
    authorizer: authz.Authorizer
    event_writer: EventWriter


def build_app(
    settings: settings_module.ServerSettings,
    *,
    deploy: DeployControl | None = None,
    delegated: Delegated | None = None,
    installs: Sequence[kinds.KindInstall] = KINDS,
) -> web.Application:
    """The API server application for `settings` (not yet listening), serving `installs`.

    Standalone, the PKI under `settings.pki_dir` is created when missing, because the
    authenticators need its CAs. With `deploy` (the sagas' control) each kind installs
    what runs its objects on the sagas: WorkflowRun writes start or signal their sagas
    and new runs get the teardown finalizer; when it also starts Invocations
    (`InvocationControl`), each new Invocation gets its workflow.
    """
    if delegated is None:
        if settings.pki_dir is None:
            raise ValueError("pki_dir is required: plnt serves HTTPS only")
        pki.ensure_pki(Path(settings.pki_dir), extra_sans=settings.extra_sans)
    standalone = delegated is None
    served = [i for i in installs if standalone or not i.standalone_only]
    definitions = kinds.served(installs, standalone=standalone)
    limiter = inflight.InFlightLimiter.from_limits(settings.limits)
    # Every installed kind's declarations, whichever mode: a superset of what is served.
    long_running = longrunning.LongRunning(i.definition for i in installs)
    app = web.Application(
        middlewares=[middleware.pipeline(limiter, long_running=long_running)],
        client_max_size=settings.max_request_body_bytes + 1,
    )
    app[keys.SETTINGS] = settings
    app[keys.METRICS] = metrics.Metrics(in_flight=limiter)
    app[keys.READY] = {"etcd": False, "watch-cache": False}
    app[keys.WATCHES] = keys.OpenWatches()
    app[keys.CONNECTION_IDENTITIES] = weakref.WeakKeyDictionary()
    app.on_shutdown.append(_close_watches)
    if delegated is None:
        app[keys.AUTHENTICATOR] = build_authenticator(settings)
        app[keys.AUTHORIZER] = build_authorizer(settings, definitions.definitions)
        app[keys.EVENT_WRITER] = None
    else:
        app[keys.AUTHENTICATOR] = delegated.authenticator
        app[keys.AUTHORIZER] = delegated.authorizer
        app[keys.EVENT_WRITER] = delegated.event_writer
    app[endpoints.DOCUMENTS] = endpoints.Documents(
        server_address=f"{settings.host}:{settings.port}", served=definitions
    )
    app[keys.SUBRESOURCES] = kinds.Subresources(served)
    composing = kinds.Composing(app=app, standalone=standalone, sagas=deploy)
    for install in installs:  # AppKeys, metrics and routes of its own, before the generic
        if install.setup is not None:
            install.setup(composing)
    app.cleanup_ctx.append(_storage_context(settings, served, standalone=standalone))
    for install in served:
        app.cleanup_ctx.extend(install.contexts)
    if settings.slot is not None:  # one of several API processes: they answer as one server
        app[keys.PEERS] = peers.Peers(settings.slot, app[keys.METRICS])
        for install in served:  # the kinds' streams (and their wiring)
            if install.streams is not None:
                install.streams(app, app[keys.PEERS])
        app.cleanup_ctx.append(app[keys.PEERS].context)  # last: stopped first
    endpoints.add_routes(app, standalone=standalone)
    # `[\s\S]`, not `.`: a name may hold a line break and is still a resource path (404 Status).
    app.router.add_route("*", r"/apis/{tail:[\s\S]+}", resources.dispatch)
    app.router.add_route("*", r"/api/{tail:[\s\S]+}", resources.dispatch)
    return app


def ssl_context_for(settings: settings_module.ServerSettings) -> ssl.SSLContext:
    """The serving TLS context, requesting (not requiring) client certificates.

    Uses the PKI `build_app` made sure of; call it after `build_app`.
    """
    if settings.pki_dir is None:
        raise ValueError("pki_dir is required: plnt serves HTTPS only")
    paths = pki.Pki.at(Path(settings.pki_dir))
    return tlsconfig.server_ssl_context(paths, client_ca_files=paths.client_ca_files)
