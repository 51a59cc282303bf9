"""`plnt push FILE REF` and `plnt pull REF`: publish and fetch workflow specs and evaluation
datasets by digest.

`push` validates FILE first, with the reader that will use it: a workflow spec with the
runner's loader, an evaluation dataset with the quality gate's (`workflowspec.datasets`).
Which one FILE is: `--kind spec|dataset`, or else its shape (`datasets.is_dataset`: a list,
a mapping of `cases` without workflow keys, JSON Lines or a `.jsonl` name is a dataset),
as kubectl reads a manifest's kind from the file itself. `push` then publishes it as an
artifact of that kind and prints the pinned reference `REF@sha256:…` as its last line on
stdout, so scripts can take `| tail -n1`. Progress and errors go to stderr; exit codes are
the table in `exits` (3 not found, 5 credentials refused, 6 invalid spec or dataset, 7 too
large, 8 store unavailable, 9 digest mismatch). Both commands take the same `StoreOptions`.
With `--sign-key` (and `--sign-cert`), `push` signs the bytes (`workflowspec.signing`,
model-signing's Sigstore bundle) before anything is published and stores the signature
beside the artifact; a key that cannot sign exits 2 with nothing published.
"""

from __future__ import annotations

import asyncio
import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from plnt.cli import exits, spec_files
from plnt.cli.store_options import StoreOptions, with_store_options
from plnt.workflowspec import references, sources
from plnt.workflowspec.sources import artifacts


class Kind(enum.StrEnum):
    """What `push` reads FILE as."""

    SPEC = "spec"
    DATASET = "dataset"


_READ_AS = {Kind.SPEC: "workflow spec", Kind.DATASET: "evaluation dataset"}


def register(app: typer.Typer) -> None:
    """Add `push` and `pull` to `app`."""
    app.command("push")(with_store_options(push))
    app.command("pull")(with_store_options(pull))


def push(
    file: Annotated[
        Path, typer.Argument(help="The workflow spec or evaluation dataset to publish.")
    ],
    ref: Annotated[
        str, typer.Argument(help="oci://HOST/REPO:TAG, s3://BUCKET/KEY or oci-layout:PATH:TAG")
    ],
    kind: Annotated[
        Kind | None,
        typer.Option(
            help="Read FILE as this. Default: a dataset when it is a list of cases, "
            "{cases: [...]}, JSON Lines or *.jsonl; a workflow spec otherwise.",
            show_default=False,
        ),
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option(
            help="Sign with this EC private key (PEM) and store the signature beside the "
            "artifact (a Sigstore bundle, OpenSSF model-signing).",
            show_default=False,
        ),
    ] = None,
    sign_cert: Annotated[
        Path | None,
        typer.Option(
            help="The signing certificate of the signing key (PEM; intermediates may follow it), "
            "embedded so a verifier needs only the CA.",
            show_default=False,
        ),
    ] = None,
    *,
    store: StoreOptions,
) -> None:
    """Validate FILE, publish it to REF (signed, given a key), and print the pinned
    reference as the last line."""
    with exits.reported(prefix=f"{file}: "):
        data = spec_files.read_bounded(file, limit=store.max_bytes)
        kind = kind or _kind_of(data, name=file.name)
    prefix = f"{file}: invalid evaluation dataset: " if kind is Kind.DATASET else f"{file}: "
    with exits.reported(prefix=prefix):
        artifact = _checked(data, kind)
    signature = _signature(data, key=sign_key, certificate=sign_cert)
    with exits.reported():
        pinned = asyncio.run(
            sources.publish(data, ref, config=store.settings(), kind=artifact, signature=signature)
        )
    typer.echo(
        f"pushed {_READ_AS[kind]} {file} ({len(data)} bytes, {artifact.media_type}) "
        f"to {references.unpinned(pinned)}" + (" with its signature" if signature else ""),
        err=True,
    )
    typer.echo(str(pinned))


def _signature(data: bytes, *, key: Path | None, certificate: Path | None) -> bytes | None:
    """The signature bundle of `data`, or None when no key was given."""
    if key is None:
        if certificate is not None:
            exits.fail(
                "--sign-cert needs --sign-key (the certificate's private key)", exits.Code.USAGE
            )
        return None
    from plnt.workflowspec import signing

    try:
        return signing.sign(data, key=key, certificate=certificate)
    except signing.SigningFailed as error:
        exits.fail(str(error), exits.Code.USAGE)


def _kind_of(data: bytes, *, name: str) -> Kind:
    # Deferred, as the readers below: the spec model loads jsonschema and jinja2.
    from plnt.workflowspec import datasets

    return Kind.DATASET if datasets.is_dataset(data, name=name) else Kind.SPEC


def _checked(data: bytes, kind: Kind) -> artifacts.Kind:
    """The artifact `data` is published as, once its reader accepts it (or its error)."""
    from plnt.workflowspec import datasets, documents

    if kind is Kind.DATASET:
        return datasets.read(data).artifact
    documents.parse_workflow(data)
    return artifacts.WORKFLOW


def pull(
    ref: Annotated[str, typer.Argument(help="A reference, ideally pinned with @sha256:…")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the spec or dataset here (default: stdout)."),
    ] = None,
    digest: Annotated[
        str | None, typer.Option(help="Refuse anything whose sha256 differs from this digest.")
    ] = None,
    *,
    store: StoreOptions,
) -> None:
    """Fetch a spec or dataset, verify its digest, and write it out; the pinned ref goes to
    stderr."""
    with exits.reported():
        pulled = asyncio.run(sources.pull(ref, digest=digest, config=store.settings()))
    if output is None:
        sys.stdout.buffer.write(pulled.data)
        sys.stdout.flush()
    else:
        output.write_bytes(pulled.data)
    typer.echo(str(pulled.ref), err=True)
