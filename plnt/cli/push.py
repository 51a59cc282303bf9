"""`plnt push FILE REF` and `plnt pull REF`: publish and fetch workflow specs by digest.

`push` validates the spec first (the same loader the runner uses), publishes it, and prints
the pinned reference `REF@sha256:…` as its last line on stdout, so scripts can take
`| tail -n1`. Progress and errors go to stderr. Exit codes:

    0  success                 4  authentication failed      7  too large
    1  other source failure    5  not found                  8  store unavailable
    2  bad usage or reference  6  digest mismatch
    3  invalid workflow spec
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from plnt.workflowspec import errors, references, sources

EXIT_CODES: dict[type[errors.SourceError], int] = {
    errors.InvalidReference: 2,
    errors.InvalidDigest: 2,
    errors.AuthenticationFailed: 4,
    errors.NotFound: 5,
    errors.DigestMismatch: 6,
    errors.TooLarge: 7,
    errors.Unavailable: 8,
}
EXIT_INVALID_SPEC = 3

Username = Annotated[
    str | None,
    typer.Option(envvar="PLNT_REGISTRY_USERNAME", help="Registry user (basic or token auth)."),
]
Password = Annotated[
    str | None,
    typer.Option(envvar="PLNT_REGISTRY_PASSWORD", help="Registry password or token secret."),
]
PlainHttp = Annotated[
    bool | None,
    typer.Option(
        "--plain-http/--https",
        help="Talk plain HTTP to the registry. Default: HTTP on loopback, HTTPS elsewhere.",
        show_default=False,
    ),
]
CaFile = Annotated[
    Path | None, typer.Option(help="CA bundle to verify the registry's TLS certificate.")
]
Insecure = Annotated[bool, typer.Option(help="Do not verify the registry's TLS certificate.")]
S3Endpoint = Annotated[
    str | None,
    typer.Option(help="S3-compatible endpoint URL (default: AWS, or AWS_ENDPOINT_URL)."),
]
S3Region = Annotated[str | None, typer.Option(help="S3 region (default: the AWS config chain).")]
MaxBytes = Annotated[int, typer.Option(help="Largest spec accepted, in bytes.")]
Timeout = Annotated[float, typer.Option(help="Per-request timeout, in seconds.")]


def register(app: typer.Typer) -> None:
    """Add `push` and `pull` to `app`."""
    app.command("push")(push)
    app.command("pull")(pull)


def push(
    file: Annotated[Path, typer.Argument(help="The workflow spec (YAML) to publish.")],
    ref: Annotated[
        str, typer.Argument(help="oci://HOST/REPO:TAG, s3://BUCKET/KEY or oci-layout:PATH:TAG")
    ],
    username: Username = None,
    password: Password = None,
    plain_http: PlainHttp = None,
    ca_file: CaFile = None,
    insecure_skip_tls_verify: Insecure = False,
    s3_endpoint_url: S3Endpoint = None,
    s3_region: S3Region = None,
    max_bytes: MaxBytes = sources.Limits.max_bytes,
    timeout: Timeout = sources.Limits.timeout,
) -> None:
    """Validate FILE, publish it to REF, and print the pinned reference as the last line."""
    config = _settings(
        username, password, plain_http, ca_file, insecure_skip_tls_verify,
        s3_endpoint_url, s3_region, max_bytes, timeout,
    )  # fmt: skip
    data = _read_spec(file, limit=max_bytes)
    from plnt.workflowspec import documents  # deferred: the spec model loads jsonschema and jinja2

    try:
        documents.parse_workflow(data)
    except documents.WorkflowSpecError as exc:
        _fail(f"{file}: {exc}", EXIT_INVALID_SPEC)
    try:
        pinned = asyncio.run(sources.publish(data, ref, config=config))
    except errors.SourceError as exc:
        _fail(str(exc), _exit_code(exc))
    typer.echo(f"pushed {file} ({len(data)} bytes) to {references.unpinned(pinned)}", err=True)
    typer.echo(str(pinned))


def pull(
    ref: Annotated[str, typer.Argument(help="A reference, ideally pinned with @sha256:…")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the spec here (default: stdout).")
    ] = None,
    digest: Annotated[
        str | None, typer.Option(help="Refuse anything whose sha256 differs from this digest.")
    ] = None,
    username: Username = None,
    password: Password = None,
    plain_http: PlainHttp = None,
    ca_file: CaFile = None,
    insecure_skip_tls_verify: Insecure = False,
    s3_endpoint_url: S3Endpoint = None,
    s3_region: S3Region = None,
    max_bytes: MaxBytes = sources.Limits.max_bytes,
    timeout: Timeout = sources.Limits.timeout,
) -> None:
    """Fetch a spec, verify its digest, and write it out; the pinned ref goes to stderr."""
    config = _settings(
        username, password, plain_http, ca_file, insecure_skip_tls_verify,
        s3_endpoint_url, s3_region, max_bytes, timeout,
    )  # fmt: skip
    try:
        pulled = asyncio.run(sources.pull(ref, digest=digest, config=config))
    except errors.SourceError as exc:
        _fail(str(exc), _exit_code(exc))
    if output is None:
        sys.stdout.buffer.write(pulled.data)
        sys.stdout.flush()
    else:
        output.write_bytes(pulled.data)
    typer.echo(str(pulled.ref), err=True)


def _settings(
    username: str | None,
    password: str | None,
    plain_http: bool | None,
    ca_file: Path | None,
    insecure: bool,
    s3_endpoint_url: str | None,
    s3_region: str | None,
    max_bytes: int,
    timeout: float,
) -> sources.SourceSettings:
    tls_verify: bool | str = str(ca_file) if ca_file else not insecure
    return sources.SourceSettings(
        limits=sources.Limits(max_bytes=max_bytes, timeout=timeout),
        registry=sources.RegistrySettings(
            username=username, password=password, plain_http=plain_http, tls_verify=tls_verify
        ),
        s3=sources.S3Settings(endpoint_url=s3_endpoint_url, region=s3_region),
    )


def _read_spec(file: Path, *, limit: int) -> bytes:
    try:
        with file.open("rb") as spec:
            size = os.fstat(spec.fileno()).st_size
            if size > limit:
                _fail(f"{file}: {size} bytes exceeds the limit of {limit} bytes", 7)
            data = spec.read(limit + 1)
    except OSError as exc:
        _fail(f"{file}: {exc.strerror or exc}", 2)
    if len(data) > limit:
        _fail(f"{file}: exceeds the limit of {limit} bytes", 7)
    return data


def _exit_code(exc: errors.SourceError) -> int:
    for kind, code in EXIT_CODES.items():
        if isinstance(exc, kind):
            return code
    return 1


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
