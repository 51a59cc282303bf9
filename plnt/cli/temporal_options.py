"""The options `plnt serve` and `plnt worker` share: how to reach Temporal (an option group)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from plnt.cli import option_groups

if TYPE_CHECKING:  # the SDK is imported inside the commands
    from plnt.sagas.starter import TemporalConnection


@dataclasses.dataclass(frozen=True, slots=True)
class TemporalOptions:
    """Temporal's address and namespace, and TLS, mTLS or an API key (Temporal Cloud)."""

    temporal_address: Annotated[
        str | None,
        typer.Option(envvar="PLNT_TEMPORAL_ADDRESS", help="Temporal frontend, HOST:PORT."),
    ] = None
    temporal_namespace: Annotated[
        str,
        typer.Option(envvar="PLNT_TEMPORAL_NAMESPACE", help="Temporal namespace of the sagas."),
    ] = "default"
    temporal_tls_ca_file: Annotated[
        Path | None,
        typer.Option(
            envvar="PLNT_TEMPORAL_TLS_CA_FILE", help="CA of Temporal's certificate (TLS)."
        ),
    ] = None
    temporal_tls_cert_file: Annotated[
        Path | None,
        typer.Option(envvar="PLNT_TEMPORAL_TLS_CERT_FILE", help="Client certificate (mTLS)."),
    ] = None
    temporal_tls_key_file: Annotated[
        Path | None,
        typer.Option(envvar="PLNT_TEMPORAL_TLS_KEY_FILE", help="Client key (mTLS)."),
    ] = None
    temporal_api_key_file: Annotated[
        Path | None,
        typer.Option(envvar="PLNT_TEMPORAL_API_KEY_FILE", help="File holding a Temporal API key."),
    ] = None

    def connection(self) -> TemporalConnection | None:
        """None without an address."""
        from plnt.sagas.starter import TemporalConnection

        if not self.temporal_address:
            return None
        return TemporalConnection(
            address=self.temporal_address,
            namespace=self.temporal_namespace,
            tls_ca_file=self.temporal_tls_ca_file,
            tls_cert_file=self.temporal_tls_cert_file,
            tls_key_file=self.temporal_tls_key_file,
            api_key_file=self.temporal_api_key_file,
        )


with_temporal_options = option_groups.takes("temporal", TemporalOptions)
"""`command(..., temporal: TemporalOptions)` as typer sees it: one `--option` per field."""
