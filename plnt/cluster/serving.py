"""Run one `plnt serve` replica until SIGTERM: check every input, join the cluster, serve.

Bad input fails before anything listens, with one line naming the flag, file or key
(`ServeError`): a file that cannot be read, a serving certificate that does not load,
a cluster that cannot be reached or whose authentication ConfigMap is unusable, an
etcd or a Temporal that does not answer. Afterwards, the ConfigMap is followed and each
new version applied (a bad one is logged and the previous kept), and the serving
certificate is re-read when its files change.

With `--workers N` (N > 1) this process is API process 0, served by the one serve
sequence (`plnt.apiserver.serving.serve`): once it listens (`SO_REUSEPORT`) it starts the
same command N-1 times as its siblings, each told its slot (`plnt.processes.apiprocesses`;
their private directory is a temporary one, removed on exit), waits until each listens,
and restarts one that exits (`plnt_child_restarts_total{child="apiserver-worker"}`). Each
process admits its share of the in-flight limits. A sibling that cannot start fails the
start as `--workers N: …`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from kubernetes_asyncio import client as kube_client
from temporalio import client as temporal_client

from plnt.apiserver import app as app_module
from plnt.apiserver import delegation, serving, servingcerts
from plnt.apiserver.settings import ServerSettings
from plnt.cluster.settings import ClusterSettings
from plnt.kube import authconfig, connecting, events, reviews
from plnt.kube.errors import ClusterError
from plnt.processes import apiprocesses, signals, tasks
from plnt.registry.workflows import sources as catalog_sources
from plnt.sagas import starter
from plnt.sagas.control import DeployUnavailable

log = logging.getLogger("plnt.cluster")


class ServeError(Exception):
    """`plnt serve` cannot start: the message names the flag, file or key, in one line."""


def _check_files(settings: ClusterSettings) -> None:
    for flag, path in settings.files().items():
        try:
            with path.open("rb"):
                pass
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise ServeError(f"{flag} {path}: {reason.lower()}") from error


async def _temporal(settings: ClusterSettings) -> temporal_client.Client | None:
    if not settings.sagas:
        return None
    if settings.temporal is None:
        raise ServeError("--temporal-address is required (or --no-sagas)")
    try:
        return await settings.temporal.connect()
    except DeployUnavailable as error:
        raise ServeError(f"--temporal-address: {error}") from error


class _Clusters:
    """One `ApiClient` per distinct kubeconfig (the three flags usually name one)."""

    def __init__(self, stack: contextlib.AsyncExitStack) -> None:
        self._stack = stack
        self._clients: dict[Path | None, kube_client.ApiClient] = {}

    async def client(self, kubeconfig: Path | None) -> kube_client.ApiClient:
        if kubeconfig not in self._clients:
            try:
                api = await self._stack.enter_async_context(connecting.api_client(kubeconfig))
            except ClusterError as error:
                raise ServeError(str(error)) from error
            self._clients[kubeconfig] = api
        return self._clients[kubeconfig]


async def _authentication(
    settings: ClusterSettings, api: kube_client.ApiClient, tls: servingcerts.ReloadingServerContext
) -> tuple[
    delegation.ClusterAuthentication, Callable[[], contextlib.AbstractAsyncContextManager[object]]
]:
    """The delegated authenticator, configured from the ConfigMap as it is now."""
    tokens = delegation.TokenReviewAuthenticator(
        reviews.TokenReviews(api), ttl=settings.token_cache_ttl
    )
    authentication = delegation.ClusterAuthentication(tokens)
    authentication.listeners.append(tls.set_client_cas)
    configmap = authconfig.AuthenticationConfigMap(api)
    where = f"{authconfig.NAMESPACE}/{authconfig.NAME}"
    try:
        data, version = await configmap.read()
        authentication.apply(data)
    except ClusterError as error:
        raise ServeError(str(error)) from error
    except delegation.AuthenticationConfigError as error:
        raise ServeError(f"configmap {where}: {error}") from error

    def apply(data: dict[str, str]) -> None:
        try:
            authentication.apply(data)
        except delegation.AuthenticationConfigError as error:
            log.error("configmap %s not applied, keeping the previous version: %s", where, error)

    def following() -> contextlib.AbstractAsyncContextManager[object]:
        return tasks.running(configmap.follow(apply, since=version), name="authconfig")

    return authentication, following


async def serve(
    settings: ClusterSettings, *, stop: asyncio.Event, on_ready: Callable[[str], None] | None = None
) -> None:
    """Serve until `stop` is set; `ServeError` (one line) when something cannot start."""
    _check_files(settings)
    if settings.catalog.sources_file is not None:
        try:
            catalog_sources.load(settings.catalog.sources_file)
        except catalog_sources.SourcesError as error:
            raise ServeError(f"--catalog-sources {error}") from error
    try:
        tls = servingcerts.ReloadingServerContext(
            settings.tls_cert_file, settings.tls_private_key_file
        )
    except servingcerts.ServingFileError as error:
        raise ServeError(f"--tls-cert-file/--tls-private-key-file: {error}") from error
    async with contextlib.AsyncExitStack() as stack:
        clusters = _Clusters(stack)
        authn_api = await clusters.client(settings.authentication_kubeconfig or settings.kubeconfig)
        authz_api = await clusters.client(settings.authorization_kubeconfig or settings.kubeconfig)
        events_api = await clusters.client(settings.kubeconfig)
        authentication, following = await _authentication(settings, authn_api, tls)
        authorizer = delegation.delegated_authorizer(
            delegation.SubjectAccessReviewAuthorizer(
                reviews.AccessReviews(authz_api),
                allowed_ttl=settings.authorized_cache_ttl,
                denied_ttl=settings.unauthorized_cache_ttl,
            )
        )
        temporal = await _temporal(settings)
        delegated = app_module.Delegated(
            authentication, authorizer, events.ClusterEvents(events_api).write
        )
        await stack.enter_async_context(following())
        await _listen(settings, tls, delegated, temporal, stop=stop, on_ready=on_ready)


def _slot(settings: ClusterSettings, directory: Path | None) -> apiprocesses.Slot | None:
    if settings.child is not None:
        return settings.child
    if directory is None:
        return None
    return apiprocesses.first(settings.api_processes, directory)


async def _listen(
    settings: ClusterSettings,
    tls: servingcerts.ReloadingServerContext,
    delegated: app_module.Delegated,
    temporal: temporal_client.Client | None,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[str], None] | None,
) -> None:
    parent = settings.child is None and settings.api_processes > 1
    directory = Path(tempfile.mkdtemp(prefix="plnt-workers-")) if parent else None
    try:
        await _listen_as(
            settings, tls, delegated, temporal, directory, stop=stop, on_ready=on_ready
        )
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


async def _listen_as(
    settings: ClusterSettings,
    tls: servingcerts.ReloadingServerContext,
    delegated: app_module.Delegated,
    temporal: temporal_client.Client | None,
    directory: Path | None,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[str], None] | None,
) -> None:
    slot = _slot(settings, directory)
    count = 1 if slot is None else slot.count
    server_settings = ServerSettings(
        etcd_endpoints=settings.etcd_servers,
        etcd_prefix=settings.etcd_prefix,
        etcd_ca_file=settings.etcd_cafile,
        etcd_cert_file=settings.etcd_certfile,
        etcd_key_file=settings.etcd_keyfile,
        host=settings.bind_address,
        port=settings.secure_port,
        limits=settings.limits.per_process(count),
        catalog=settings.catalog,
        signatures=settings.signatures,
        slot=slot,
    )
    control = starter.TemporalDeployControl(temporal) if temporal is not None else None
    application = app_module.build_app(server_settings, deploy=control, delegated=delegated)

    async def announce(server: str, parts: contextlib.AsyncExitStack) -> None:
        if on_ready is not None:
            on_ready(server)

    try:
        await serving.serve(
            application,
            host=settings.bind_address,
            port=settings.secure_port,
            ssl_context=tls.context,
            shutdown_timeout=5.0,
            # A caller that goes away cancels its handler, as under `plnt up`: a buffered
            # invoke's runner call is cancelled with it instead of running to its deadline.
            handler_cancellation=True,
            stop=stop,
            # API processes 1..N-1: this very command again (`sys.orig_argv`), each told
            # its slot, so each composes the same delegated authentication and clients.
            sibling_argv=[sys.executable, *sys.orig_argv[1:]],
            ready=announce,
        )
    except serving.StartupFailed as error:  # the storage context: etcd did not answer
        servers = ",".join(settings.etcd_servers)
        raise ServeError(f"--etcd-servers {servers}: {error}") from error
    except serving.CannotListen as error:
        raise ServeError(f"--secure-port: {error}") from error
    except apiprocesses.SiblingFailed as error:
        raise ServeError(f"--workers {count}: {error}") from error


def run(settings: ClusterSettings, *, on_ready: Callable[[str], None]) -> None:
    """Blocking entry point for the CLI: serve until SIGINT or SIGTERM."""
    signals.run_until_signalled(lambda stop: serve(settings, stop=stop, on_ready=on_ready))
