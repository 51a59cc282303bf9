"""`plnt push FILE REF` and `plnt pull REF`: publish and fetch workflow specs by digest.

`push` validates the spec first (the same loader the runner uses), publishes it, and prints
the pinned reference `REF@sha256:…` as its last line on stdout, so scripts can take
`| tail -n1`. Progress and errors go to stderr; exit codes are the table in `exits`
(3 not found, 5 credentials refused, 6 invalid spec, 7 too large, 8 store unavailable,
9 digest mismatch). Both commands take the same `StoreOptions`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from plnt.cli import exits, spec_files
from plnt.cli.store_options import StoreOptions, with_store_options
from plnt.workflowspec import references, sources


def register(app: typer.Typer) -> None:
    """Add `push` and `pull` to `app`."""
    app.command("push")(with_store_options(push))
    app.command("pull")(with_store_options(pull))


def push(
    file: Annotated[Path, typer.Argument(help="The workflow spec (YAML) to publish.")],
    ref: Annotated[
        str, typer.Argument(help="oci://HOST/REPO:TAG, s3://BUCKET/KEY or oci-layout:PATH:TAG")
    ],
    *,
    store: StoreOptions,
) -> None:
    """Validate FILE, publish it to REF, and print the pinned reference as the last line."""
    with exits.reported(prefix=f"{file}: "):
        data = spec_files.read_valid(file, limit=store.max_bytes)
    with exits.reported():
        pinned = asyncio.run(sources.publish(data, ref, config=store.settings()))
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
    *,
    store: StoreOptions,
) -> None:
    """Fetch a spec, verify its digest, and write it out; the pinned ref goes to stderr."""
    with exits.reported():
        pulled = asyncio.run(sources.pull(ref, digest=digest, config=store.settings()))
    if output is None:
        sys.stdout.buffer.write(pulled.data)
        sys.stdout.flush()
    else:
        output.write_bytes(pulled.data)
    typer.echo(str(pulled.ref), err=True)
