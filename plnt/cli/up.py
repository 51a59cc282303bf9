"""`plnt up`: run plnt standalone (embedded etcd, HTTPS on loopback, a kubeconfig)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from plnt.apiserver import standalone


def register(app: typer.Typer) -> None:
    """Add `up` to `app`."""
    app.command("up")(up)


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
) -> None:
    """Run etcd and the plnt API server until interrupted; objects survive restarts."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")

    def ready(server: str, kubeconfig: Path) -> None:
        print(f"plnt is ready at {server}; export KUBECONFIG={kubeconfig}", flush=True)

    try:
        standalone.run(
            standalone.StandaloneSettings(
                state_dir=state_dir.expanduser().resolve(),
                host=host,
                port=port,
                token_file=token_file,
                policy_file=policy_file,
            ),
            on_ready=ready,
        )
    except standalone.StandaloneError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None
    sys.stdout.flush()
