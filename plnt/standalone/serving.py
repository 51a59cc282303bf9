"""Standalone mode (`plnt up`): etcd as a child process, the API server on loopback, a kubeconfig.

Everything lives in one state directory, so a restart with the same directory
finds the same objects, certificates and kubeconfig:

    DIR/etcd/         etcd's data (and DIR/etcd.log)
    DIR/pki/          CA, serving and admin client certificates
    DIR/kubeconfig    admin credentials for kubectl
    DIR/temporal.db   the embedded Temporal dev server's state (and temporal.log)
    DIR/specs/        the deploy worker's cache of verified workflow specs
    DIR/runners/      the local target: runner processes' records, specs and logs
    DIR/prometheus/   Prometheus file SD files: the API server, each run's runners
    DIR/*.pid         the running children's records (etcd.pid, temporal.pid; and
                      models/NAME.pid, runners/forkserver.pid): `plnt.processes.leftovers`

Unless `temporal_address` names an external Temporal, a Temporal dev server runs as
a child process too; unless `deploy_worker` is off, the deploy worker runs in this process.
With `model` (`plnt up --model NAME`) a model server on plnt's pinned weights runs as a
child as well, started first (a missing `llm` extra or weights that are not the pinned
bytes stop `plnt up` before anything else starts), and once the API server listens its
PlntBackend is created or updated (`modelserving`; DIR/models/ holds its log and port).

etcd, the embedded Temporal and the model server are supervised
(`plnt.processes.supervision`): a child
that exits on its own is started again, with backoff, on the same ports and data, and
everything that talks to it reconnects (the etcd channel and the watch cache, which
resumes from the last revision it applied; the Temporal client and the deploy worker, whose
sagas resume from their history). Each restart is one warning line and counts in
`plnt_child_restarts_total{child="etcd"|"temporal"|"model"}`.

With `api_processes` > 1 (`plnt up --workers N`) this process is API process 0 of N
sharing the port, served by the one serve sequence (`plnt.apiserver.serving.serve`): once
it listens it starts its siblings, processes 1..N-1 (`plnt.standalone.apiprocess`, given
this process's `ServerSettings` as JSON in DIR/workers/, mode 0700), waits until each
listens, and supervises them (`plnt_child_restarts_total{child="apiserver-worker"}`); the
in-flight limits are divided among the processes (`ServingLimits.per_process`).

Before anything starts, children an earlier run of DIR left running are stopped, one
warning line each (`reclaiming`). Every child but the runners gets SIGTERM from the kernel
when this process dies (`plnt.processes.tethering`; the fork server ends as its socket
closes), and starts with an environment built for it (`plnt.processes.environments`): no
`PORT`, `HOST` or `MODEL` exported for `make` reaches a child, which takes every setting
from its command line.

On SIGINT/SIGTERM the deploy worker stops, the sibling API processes are stopped and
reaped, the server stops accepting and closes watches, the supervisors stop, then
Temporal, etcd and the model server are stopped and reaped. Runner processes are left
running on purpose: they serve invocations across restarts and are adopted by the next
deploy worker (`plnt down --state-dir DIR` stops them).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from temporalio import client as temporal_client

from plnt.apiserver import app as app_module
from plnt.apiserver import authn, authz, keys, pki, serving
from plnt.apiserver.settings import CatalogSettings, ServerSettings, ServingLimits
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes import apiprocesses, models, signals
from plnt.processes.etcd import EtcdProcess, EtcdProcessError
from plnt.processes.modelserver import ModelServer
from plnt.processes.supervision import Supervisor, supervising
from plnt.processes.temporal import TemporalDevServer, TemporalProcessError
from plnt.registry.workflows import sources as catalog_sources
from plnt.sagas import starter, worker
from plnt.sagas.control import DeployUnavailable
from plnt.sagas.metrics import SagaMetrics
from plnt.standalone import apiprocess, modelserving, reclaiming, scrape
from plnt.workflowspec import scanning
from plnt.workflowspec.signers import SignaturePolicy

log = logging.getLogger("plnt.standalone")


class StandaloneError(Exception):
    """`plnt up` cannot start: the message says why in one line (port taken, etcd failed)."""


@dataclass(frozen=True, slots=True)
class StandaloneSettings:
    """What `plnt up` was asked for."""

    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 6443
    etcd_client_port: int = 0
    token_file: Path | None = None
    policy_file: Path | None = None
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    temporal_ui: bool = True
    deploy_worker: bool = True
    """Run the deploy worker in this process (`--worker/--no-worker`)."""
    sagas: bool = True
    model: str | None = None
    """A model of `plnt.processes.models.CATALOG` to serve beside plnt (the `llm` extra)."""
    limits: ServingLimits = field(default_factory=ServingLimits)
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    """The workflow catalog's sources file and refresh; without a file, every layout under
    `STATE/layouts` (where `plnt push oci-layout:…` and `make up` put specs)."""
    api_processes: int = 1
    """API server processes sharing the port (`--workers`); 1: this process alone."""
    signatures: SignaturePolicy | None = None
    """Trusted signers and the namespaces whose runs must be signed (admission and pull)."""


TOKEN_FILE = "tokens.csv"


def token_file_of(settings: StandaloneSettings) -> Path:
    """The bearer token file: `--token-file`, else `STATE/tokens.csv` (re-read on change)."""
    return settings.token_file or settings.state_dir / TOKEN_FILE


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, *, server: str, paths: pki.Pki) -> None:
    """A kubeconfig with the admin client certificate inlined (context `plnt`)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "plnt",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(paths.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": "plnt-admin",
                "user": {
                    "client-certificate-data": _b64(paths.admin_cert),
                    "client-key-data": _b64(paths.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": "plnt",
                "context": {"cluster": "plnt", "user": "plnt-admin", "namespace": "default"},
            }
        ],
        "current-context": "plnt",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


@dataclass(frozen=True, slots=True)
class ModelReady:
    """The model server, as the start-up message names it."""

    name: str
    endpoint: str
    log_file: Path
    terms: str
    started: str = ""
    """Where its start went: `weights assembled …, verified …, server loaded …`."""


@dataclass(frozen=True, slots=True)
class Ready:
    """Where the started parts listen, for the start-up message."""

    server: str
    kubeconfig: Path
    temporal_address: str | None
    temporal_ui: str | None
    scrape_config: str | None = None
    """The one-line Prometheus `scrape_configs` entry that reads `DIR/prometheus`."""
    model: ModelReady | None = None
    """The model server and its PlntBackend (named as the model), with `--model`."""


async def serve(
    settings: StandaloneSettings,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[Ready], None] | None = None,
) -> None:
    """Run etcd, Temporal, the API server and the deploy worker until `stop` is set, then
    stop all."""
    state = settings.state_dir
    state.mkdir(parents=True, exist_ok=True)
    try:  # refuse bad input before anything starts
        if settings.policy_file is not None:
            authz.load_policy(settings.policy_file)
        if settings.token_file is None:  # `plnt token create --state-dir` writes this one
            default_tokens = token_file_of(settings)
            if not default_tokens.exists():
                default_tokens.touch(mode=0o600)
        authn.TokenFileAuthenticator.from_file(token_file_of(settings))
        pin = None if settings.model is None else modelserving.check(settings.model)
        if settings.catalog.sources_file is not None:
            catalog_sources.load(settings.catalog.sources_file)
        paths = pki.ensure_pki(state / "pki")
    except (authz.PolicyError, authn.TokenFileError, pki.PkiError, models.ModelError) as error:
        raise StandaloneError(str(error)) from error
    except catalog_sources.SourcesError as error:
        raise StandaloneError(f"--catalog-sources {error}") from error
    try:
        await reclaiming.stop_leftovers(state)
    except reclaiming.InUse as error:
        raise StandaloneError(str(error)) from error
    model: ModelServer | None = None
    if pin is not None:  # first: weights that are not the pinned bytes start nothing at all
        try:
            model = await modelserving.start(pin, state)
        except models.ModelError as error:
            raise StandaloneError(f"the model server did not start: {error}") from error
    try:
        await _serve_children(settings, paths=paths, model=model, stop=stop, on_ready=on_ready)
    finally:
        if model is not None:
            await model.astop()


async def _serve_children(
    settings: StandaloneSettings,
    *,
    paths: pki.Pki,
    model: ModelServer | None,
    stop: asyncio.Event,
    on_ready: Callable[[Ready], None] | None,
) -> None:
    """etcd, Temporal, the API server and the deploy worker, with the model server (if any)
    supervised beside them."""
    state = settings.state_dir
    etcd = EtcdProcess(state / "etcd", client_port=settings.etcd_client_port)
    try:
        await etcd.astart()
    except EtcdProcessError as error:
        raise StandaloneError(f"etcd did not start: {error}") from error
    temporal: TemporalDevServer | None = None
    try:
        async with contextlib.AsyncExitStack() as children:
            supervisors = [await children.enter_async_context(supervising(etcd, what="etcd"))]
            if model is not None:
                supervisors.append(
                    await children.enter_async_context(supervising(model, what="model"))
                )
            if not settings.sagas:  # the API alone: no Temporal, no deploy worker, no deploys
                await _serve_api(
                    settings,
                    etcd_endpoint=etcd.endpoint,
                    paths=paths,
                    model=model,
                    stop=stop,
                    temporal=None,
                    temporal_address=None,
                    supervisors=supervisors,
                    ready=lambda server, kubeconfig: Ready(server, kubeconfig, None, None),
                    on_ready=on_ready,
                )
                return
            if settings.temporal_address is None:
                temporal = TemporalDevServer(
                    state / "temporal.db",
                    namespace=settings.temporal_namespace,
                    ui_port=0 if settings.temporal_ui else None,
                )
                try:
                    await temporal.astart()
                except TemporalProcessError as error:
                    raise StandaloneError(f"Temporal did not start: {error}") from error
                supervisors.append(
                    await children.enter_async_context(supervising(temporal, what="temporal"))
                )
            address = temporal.address if temporal is not None else settings.temporal_address
            assert address is not None
            try:
                client = await starter.connect(address, namespace=settings.temporal_namespace)
            except DeployUnavailable as error:
                raise StandaloneError(str(error)) from error
            await _serve_api(
                settings,
                etcd_endpoint=etcd.endpoint,
                paths=paths,
                model=model,
                stop=stop,
                temporal=client,
                temporal_address=address,
                supervisors=supervisors,
                ready=lambda server, kubeconfig: Ready(
                    server, kubeconfig, address, temporal.ui_address if temporal else None
                ),
                on_ready=on_ready,
            )
    finally:
        if temporal is not None:
            await temporal.astop()
        await etcd.astop()


async def _serve_api(
    settings: StandaloneSettings,
    *,
    etcd_endpoint: str,
    paths: pki.Pki,
    model: ModelServer | None,
    stop: asyncio.Event,
    temporal: temporal_client.Client | None,
    temporal_address: str | None,
    supervisors: list[Supervisor],
    ready: Callable[[str, Path], Ready],
    on_ready: Callable[[Ready], None] | None,
) -> None:
    state = settings.state_dir
    count = settings.api_processes
    slot = None
    if count > 1:
        slot = apiprocesses.first(count, state / API_PROCESSES_DIR)
    server_settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint,),
        host=settings.host,
        port=settings.port,
        pki_dir=state / "pki",
        token_file=token_file_of(settings),
        policy_file=settings.policy_file,
        limits=settings.limits.per_process(count),
        catalog=dataclasses.replace(
            settings.catalog,
            layout_root=state / "layouts",
            default_sources=(scanning.EVERY_LAYOUT,),
        ),
        slot=slot,
        signatures=settings.signatures,
    )
    control = starter.TemporalDeployControl(temporal) if temporal is not None else None
    application = app_module.build_app(server_settings, deploy=control)

    async def announce(server: str, parts: contextlib.AsyncExitStack) -> None:
        """The kubeconfig, the scrape targets and the model's PlntBackend, then the deploy
        worker (which reaches the API through that kubeconfig), then the ready line."""
        kubeconfig = state / "kubeconfig"
        write_kubeconfig(kubeconfig, server=server, paths=paths)
        scrape.write_server_targets(state, host=settings.host, port=settings.port)
        started = dataclasses.replace(
            ready(server, kubeconfig),
            scrape_config=scrape.scrape_config(state, paths),
            model=None if model is None else await _register_model(kubeconfig, model),
        )
        if settings.deploy_worker and temporal is not None:
            api = PlntClient.from_kubeconfig(kubeconfig)
            activities = worker.local_activities(api, state, signatures=settings.signatures)
            # The deploy worker's metrics join the server's: one /metrics for both.
            metrics = SagaMetrics(application[keys.METRICS].registry)
            await parts.enter_async_context(  # probes too
                worker.running(temporal, activities, metrics=metrics)
            )
        if on_ready is not None:
            on_ready(started)

    sibling_argv = None
    if slot is not None:  # stopped (left in reverse) before etcd and Temporal are
        sibling_argv = _sibling_argv(
            server_settings, slot, temporal_address, settings.temporal_namespace
        )
    try:
        await serving.serve(
            application,
            host=settings.host,
            port=settings.port,
            ssl_context=app_module.ssl_context_for(server_settings),
            shutdown_timeout=2.0,
            handler_cancellation=True,
            stop=stop,
            sibling_argv=sibling_argv,
            supervisors=supervisors,
            ready=announce,
        )
    except serving.CannotListen as error:
        raise StandaloneError(str(error)) from error
    except apiprocesses.SiblingFailed as error:
        raise StandaloneError(f"--workers {count}: {error}") from error


API_PROCESSES_DIR = "workers"
"""Under the state directory: the API processes' private directory (settings, ready
files, the sibling sockets of `plnt.apiserver.peers`); named after `--workers`."""


def _sibling_argv(
    server_settings: ServerSettings,
    slot: apiprocesses.Slot,
    temporal_address: str | None,
    temporal_namespace: str,
) -> list[str]:
    """API processes 1..N-1: `plnt.standalone.apiprocess` on the settings this process
    serves, written to the private directory."""
    settings_file = slot.directory / "settings.json"
    apiprocess.write(
        settings_file,
        apiprocess.ApiProcessSettings(
            server=dataclasses.replace(server_settings, slot=None),
            temporal_address=temporal_address,
            temporal_namespace=temporal_namespace,
        ),
    )
    return [sys.executable, "-m", "plnt.standalone.apiprocess", str(settings_file)]


async def _register_model(kubeconfig: Path, model: ModelServer) -> ModelReady:
    """Create or update the model server's PlntBackend through the API just started."""
    try:
        async with PlntClient.from_kubeconfig(kubeconfig) as api:
            await modelserving.register(api, model)
    except client_errors.ClientError as error:
        raise StandaloneError(f"the PlntBackend of {model.model} was refused: {error}") from error
    started = model.started.describe() if model.started is not None else ""
    return ModelReady(model.model, model.endpoint, model.log_file, model.pin.terms, started)


def run(settings: StandaloneSettings, *, on_ready: Callable[[Ready], None]) -> None:
    """Blocking entry point for the CLI: serve until SIGINT or SIGTERM."""
    signals.run_until_signalled(lambda stop: serve(settings, stop=stop, on_ready=on_ready))
