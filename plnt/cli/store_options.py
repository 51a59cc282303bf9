"""The options `plnt push` and `plnt pull` share: how to reach and trust a spec store.

`StoreOptions` is an option group (`option_groups`): declared once, so the two commands
cannot drift apart, and the settings are built in one place.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from plnt.cli import option_groups
from plnt.workflowspec import sources


@dataclasses.dataclass(frozen=True, slots=True)
class StoreOptions:
    """Credentials, TLS and limits for one push or pull; `settings()` is what sources take."""

    username: Annotated[
        str | None,
        typer.Option(envvar="PLNT_REGISTRY_USERNAME", help="Registry user (basic or token auth)."),
    ] = None
    password: Annotated[
        str | None,
        typer.Option(envvar="PLNT_REGISTRY_PASSWORD", help="Registry password or token secret."),
    ] = dataclasses.field(default=None, repr=False)
    plain_http: Annotated[
        bool | None,
        typer.Option(
            "--plain-http/--https",
            help="Talk plain HTTP to the registry. Default: HTTP on loopback, HTTPS elsewhere.",
            show_default=False,
        ),
    ] = None
    ca_file: Annotated[
        Path | None, typer.Option(help="CA bundle to verify the registry's TLS certificate.")
    ] = None
    insecure_skip_tls_verify: Annotated[
        bool, typer.Option(help="Do not verify the registry's TLS certificate.")
    ] = False
    s3_endpoint_url: Annotated[
        str | None,
        typer.Option(help="S3-compatible endpoint URL (default: AWS, or AWS_ENDPOINT_URL)."),
    ] = None
    s3_region: Annotated[
        str | None, typer.Option(help="S3 region (default: the AWS config chain).")
    ] = None
    max_bytes: Annotated[int, typer.Option(help="Largest spec accepted, in bytes.")] = (
        sources.Limits.max_bytes
    )
    timeout: Annotated[float, typer.Option(help="Per-request timeout, in seconds.")] = (
        sources.Limits.timeout
    )

    def settings(self) -> sources.SourceSettings:
        """The sources' settings: a CA file wins over `--insecure-skip-tls-verify`."""
        tls_verify: bool | str = (
            str(self.ca_file) if self.ca_file else not self.insecure_skip_tls_verify
        )
        return sources.SourceSettings(
            limits=sources.Limits(max_bytes=self.max_bytes, timeout=self.timeout),
            registry=sources.RegistrySettings(
                username=self.username,
                password=self.password,
                plain_http=self.plain_http,
                tls_verify=tls_verify,
            ),
            s3=sources.S3Settings(endpoint_url=self.s3_endpoint_url, region=self.s3_region),
        )


with_store_options = option_groups.takes("store", StoreOptions)
"""`command(..., store: StoreOptions)` as typer sees it: one `--option` per field."""
