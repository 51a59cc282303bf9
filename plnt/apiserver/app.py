"""The composition root: the only module that picks concrete storage, authn and authz,
and wires each kind's HTTP (its subresources, AppKeys and cleanup contexts) in.

`build_app(settings)` returns an aiohttp application whose etcd client, watch
cache and resource stores are created and torn down in a cleanup context, so
nothing lives at module level and tests can build as many servers as they like.
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
from plnt.apiserver.controllers import benchgauges
from plnt.apiserver.controllers import namespaces as namespace_controller
from plnt.apiserver.invocations import admission as invocation_admission
from plnt.apiserver.invocations import keys as invocation_keys
from plnt.apiserver.invocations import metering, starting
from plnt.apiserver.namespaces import routes as namespace_routes
from plnt.apiserver.namespaces import stores as namespace_stores
from plnt.apiserver.workflowruns import deployhooks, invoke, routes, shadowing, sharing
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.apiserver.workflows import refreshing as catalog_refreshing
from plnt.processes import tasks
from plnt.registry import events, invocations, workflowruns
from plnt.registry.catalog import IN_MEMORY, all_resources, core_resources
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.events import EventWriter
from plnt.registry.hooks import Admission, AfterWrite
from plnt.registry.store import ResourceStore
from plnt.sagas.control import DeployControl, InvocationControl
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.interface import Store
from plnt.storage.memory import MemoryStore

log = logging.getLogger("plnt.apiserver")


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


def build_authorizer(settings: settings_module.ServerSettings) -> authz.Authorizer:
    policy = authz.load_policy(settings.policy_file) if settings.policy_file else None
    return authz.standalone_authorizer(policy)


def _storage_context(
    settings: settings_module.ServerSettings, *, standalone: bool
) -> Callable[[web.Application], AsyncIterator[None]]:
    # The catalog's Workflows are rebuilt from their sources, so they live in memory
    # (`catalog_refreshing.context`), not in etcd.
    resources = tuple(d for d in all_resources(standalone=standalone) if d not in IN_MEMORY)

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
                cache = CachedStore(etcd, prefixes=[d.key_prefix() for d in resources])
                await cache.start()
                store = cache
            ready["watch-cache"] = True
            app[keys.STORAGE] = store
            if standalone:  # plnt's own Namespaces, and NamespaceLifecycle on the rest
                stores = namespace_stores.standalone_stores(
                    resources,
                    store,
                    lambda d, s, admission: _resource_store(
                        app, d, s, admission=admission, standalone=True
                    ),
                )
            else:
                stores = {
                    (d.group, d.plural): _resource_store(app, d, store, standalone=False)
                    for d in resources
                }
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


def _resource_store(
    app: web.Application,
    d: ResourceDefinition,
    storage: Store,
    *,
    admission: Sequence[Admission] = (),
    standalone: bool,
) -> ResourceStore:
    """WorkflowRuns of a server with sagas get the deploy hooks (after every stored write)
    and the teardown finalizer. Invocations get their admission (may the requester invoke
    the run; its owner reference) and their meter, and on a server with sagas the hooks
    that start and cancel their workflows."""
    hooks = app.get(run_keys.DEPLOY_HOOKS)
    if hooks is not None and d is workflowruns.DEFINITION:
        definition = workflowruns.with_teardown(
            standalone=standalone, signatures=app[keys.SETTINGS].signatures
        )
        return ResourceStore(definition, storage, admission=admission, after_write=(hooks,))
    if d is invocations.DEFINITION:
        checks = invocation_admission.InvocationAdmission(
            authorizer=app[keys.AUTHORIZER], stores=lambda: _stores(app)
        )
        after: list[AfterWrite] = [app[invocation_keys.METER]]
        if (starts := app.get(invocation_keys.HOOKS)) is not None:
            after.append(starts)
        return ResourceStore(
            d, storage, admission=admission, object_admission=(checks,), after_write=after
        )
    return ResourceStore(d, storage, admission=admission)


async def _deploy_context(app: web.Application) -> AsyncIterator[None]:
    """Start-up convergence and retries of deploy submissions, after storage is ready."""
    hooks = app[run_keys.DEPLOY_HOOKS]
    hooks.start(app[keys.STORES][(workflowruns.DEFINITION.group, "workflowruns")])
    try:
        yield
    finally:
        await hooks.close()


def _stores(app: web.Application) -> dict[tuple[str, str], ResourceStore]:
    return app[keys.STORES]


async def _invocation_context(app: web.Application) -> AsyncIterator[None]:
    """Start-up convergence and retries of invocation starts, after storage is ready."""
    hooks = app[invocation_keys.HOOKS]
    hooks.start_loop(
        app[keys.STORES][(invocations.DEFINITION.group, invocations.DEFINITION.plural)]
    )
    try:
        yield
    finally:
        await hooks.close()


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
) -> web.Application:
    """The API server application for `settings` (not yet listening).

    Standalone, the PKI under `settings.pki_dir` is created when missing, because the
    authenticators need its CAs. With `deploy`, WorkflowRun writes start or signal
    their sagas (see `deployhooks`) and new runs get the teardown finalizer; when it also
    starts Invocations (`InvocationControl`), each new Invocation gets its workflow.
    """
    if delegated is None:
        if settings.pki_dir is None:
            raise ValueError("pki_dir is required: plnt serves HTTPS only")
        pki.ensure_pki(Path(settings.pki_dir), extra_sans=settings.extra_sans)
    limiter = inflight.InFlightLimiter.from_limits(settings.limits)
    app = web.Application(
        middlewares=[middleware.pipeline(limiter)],
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
        app[keys.AUTHORIZER] = build_authorizer(settings)
        app[keys.EVENT_WRITER] = None
    else:
        app[keys.AUTHENTICATOR] = delegated.authenticator
        app[keys.AUTHORIZER] = delegated.authorizer
        app[keys.EVENT_WRITER] = delegated.event_writer
    standalone = delegated is None
    app[endpoints.DOCUMENTS] = endpoints.Documents(
        server_address=f"{settings.host}:{settings.port}",
        core=core_resources(standalone=standalone),
    )
    app[keys.DEPLOY] = deploy
    app[keys.SUBRESOURCES] = kinds.Subresources([routes.HTTP])  # each kind's, from its package
    if deploy is not None:
        app[run_keys.DEPLOY_HOOKS] = deployhooks.DeployHooks(deploy)
    app[invocation_keys.METER] = metering.FinishMeter(app[keys.METRICS].registry)
    if isinstance(deploy, InvocationControl):
        app[invocation_keys.HOOKS] = starting.InvocationHooks(deploy)
    app.cleanup_ctx.append(_storage_context(settings, standalone=standalone))
    app.cleanup_ctx.append(catalog_refreshing.context(MemoryStore))  # adds its store
    app.cleanup_ctx.append(benchgauges.context)
    app.cleanup_ctx.append(metering.context)
    if standalone:
        app.cleanup_ctx.append(namespace_controller.controller_context)
    if deploy is not None:
        app.cleanup_ctx.append(_deploy_context)
    if invocation_keys.HOOKS in app:
        app.cleanup_ctx.append(_invocation_context)
    app.cleanup_ctx.append(invoke.upstream_context)
    app.cleanup_ctx.append(shadowing.context)  # after the session: stopped before it closes
    if settings.worker is not None:  # one of several workers: they answer as one server
        app[keys.PEERS] = peers.Peers(settings.worker, app[keys.METRICS])
        sharing.register(app, app[keys.PEERS])  # the kind's streams (and their wiring)
        app.cleanup_ctx.append(app[keys.PEERS].context)  # last: stopped first
    endpoints.add_routes(app, standalone=standalone)
    namespace_routes.add_routes(app, standalone=standalone)  # before the generic routes
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
