"""`plnt serve`: the API server as an aggregated APIService in a cluster (what the chart runs).

Flags are named as k8s.io/apiserver names them; each may also come from the
environment as `PLNT_<FLAG>` (`--secure-port` → `PLNT_SECURE_PORT`). See docs/cluster.md.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from plnt.cli import api_process_count, exits
from plnt.cli.catalog_options import CatalogOptions, with_catalog_options
from plnt.cli.limit_options import LimitOptions, with_limit_options
from plnt.cli.signature_options import SignatureOptions, with_signature_options
from plnt.cli.temporal_options import TemporalOptions, with_temporal_options
from plnt.processes.exiting import exit_now


def register(app: typer.Typer) -> None:
    """Add `serve` to `app`."""
    app.command(
        "serve",
        epilog="Example: plnt serve --tls-cert-file tls.crt --tls-private-key-file tls.key "
        "--etcd-servers https://etcd:2379 --temporal-address temporal:7233",
    )(serve)


def _announce(url: str) -> None:
    print(f"plnt is serving at {url}", flush=True)


def _option(flag: str, help: str) -> Any:
    return typer.Option(
        flag, envvar="PLNT_" + flag.lstrip("-").replace("-", "_").upper(), help=help
    )


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


def duration(text: str) -> float:
    """Seconds from a Go-style duration as kube's flags take it (`10s`, `2m`, `500ms`)."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise typer.BadParameter(f"{text!r} is not a duration such as 10s, 2m or 500ms")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[match.group(2)]
    return float(match.group(1)) * scale


@with_limit_options
@with_temporal_options
@with_catalog_options
@with_signature_options
def serve(
    tls_cert_file: Annotated[Path, _option("--tls-cert-file", "Serving certificate (PEM).")],
    tls_private_key_file: Annotated[
        Path, _option("--tls-private-key-file", "Serving private key (PEM).")
    ],
    etcd_servers: Annotated[str, _option("--etcd-servers", "etcd client URLs, comma-separated.")],
    etcd_cafile: Annotated[
        Path | None, _option("--etcd-cafile", "CA of etcd's certificate.")
    ] = None,
    etcd_certfile: Annotated[
        Path | None, _option("--etcd-certfile", "Client certificate for etcd.")
    ] = None,
    etcd_keyfile: Annotated[Path | None, _option("--etcd-keyfile", "Client key for etcd.")] = None,
    etcd_prefix: Annotated[str, _option("--etcd-prefix", "Key prefix in etcd.")] = "/registry",
    bind_address: Annotated[str, _option("--bind-address", "Address to listen on.")] = "0.0.0.0",
    secure_port: Annotated[int, _option("--secure-port", "HTTPS port.")] = 6443,
    kubeconfig: Annotated[
        Path | None, _option("--kubeconfig", "The cluster (default: in-cluster config).")
    ] = None,
    authentication_kubeconfig: Annotated[
        Path | None,
        _option("--authentication-kubeconfig", "Cluster for TokenReview (default: --kubeconfig)."),
    ] = None,
    authorization_kubeconfig: Annotated[
        Path | None,
        _option(
            "--authorization-kubeconfig", "Cluster for SubjectAccessReview (default: --kubeconfig)."
        ),
    ] = None,
    token_cache_ttl: Annotated[
        str, _option("--authentication-token-webhook-cache-ttl", "How long TokenReviews count.")
    ] = "10s",
    authorized_ttl: Annotated[
        str,
        _option("--authorization-webhook-cache-authorized-ttl", "How long an allow counts."),
    ] = "10s",
    unauthorized_ttl: Annotated[
        str,
        _option("--authorization-webhook-cache-unauthorized-ttl", "How long a denial counts."),
    ] = "10s",
    *,
    temporal: TemporalOptions,
    limits: LimitOptions,
    catalog: CatalogOptions,
    signatures: SignatureOptions,
    sagas: Annotated[
        bool,
        typer.Option(
            "--sagas/--no-sagas",
            envvar="PLNT_SAGAS",
            help="Deploy WorkflowRuns through Temporal; --no-sagas serves the API only.",
        ),
    ] = True,
    api_processes: Annotated[int | None, _option("--workers", api_process_count.HELP)] = None,
) -> None:
    """Serve the plnt API as an aggregated APIService: kube-apiserver proxies to it, and
    authentication, authorization and Events are the cluster's."""
    from plnt.cluster import serving
    from plnt.cluster.settings import ClusterSettings
    from plnt.processes.apiprocesses import Slot, die_with_parent

    child = Slot.from_environment()  # a sibling API process a first `plnt serve` started
    if child is not None:
        die_with_parent(child.parent)
    count = api_process_count.resolve(api_processes) if child is None else 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = ClusterSettings(
        tls_cert_file=tls_cert_file,
        tls_private_key_file=tls_private_key_file,
        etcd_servers=tuple(s.strip() for s in etcd_servers.split(",") if s.strip()),
        etcd_cafile=etcd_cafile,
        etcd_certfile=etcd_certfile,
        etcd_keyfile=etcd_keyfile,
        etcd_prefix=etcd_prefix,
        bind_address=bind_address,
        secure_port=secure_port,
        temporal=temporal.connection(),
        kubeconfig=kubeconfig,
        authentication_kubeconfig=authentication_kubeconfig,
        authorization_kubeconfig=authorization_kubeconfig,
        token_cache_ttl=duration(token_cache_ttl),
        authorized_cache_ttl=duration(authorized_ttl),
        unauthorized_cache_ttl=duration(unauthorized_ttl),
        sagas=sagas,
        signatures=signatures.policy(),
        limits=limits.settings(),
        catalog=catalog.settings(),
        api_processes=count,
        child=child,
    )
    code = exits.Code.OK
    try:
        serving.run(settings, on_ready=_announce if child is None else lambda url: None)
    except serving.ServeError as error:
        typer.echo(f"error: {error}", err=True)
        code = exits.Code.FAILED
    exit_now(int(code))
