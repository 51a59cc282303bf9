"""The worker's content-addressed cache of pulled, verified workflow specs.

Why a cache on disk: pull, smoke and install run as separate activities (possibly
retried on another worker), and specs must not travel through the workflow history.
Each activity asks `ensure(ref, digest)`: a cached file is re-verified against its
name before use, and a missing one is pulled again, so a fresh worker needs nothing
but the reference.

Errors: the `plnt.workflowspec.errors.SourceError` tree from the pull, and
`plnt.workflowspec.documents.SpecError` for bytes that are not a valid workflow.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from plnt.workflowspec import (
    bundles,
    digests,
    documents,
    model,
    references,
    signers,
    sources,
    trees,
    verifying,
)
from plnt.workflowspec import errors as spec_errors


class SpecCache:
    """Verified specs under `root/sha256/HEX`.

    A relative `oci-layout:` path in a WorkflowRun means a layout inside `layout_root`
    (standalone: `STATE/layouts`), so a run's YAML does not depend on where the worker
    runs or what its working directory is; `..` may not leave that root.
    """

    def __init__(
        self,
        root: Path,
        *,
        config: sources.SourceSettings | None = None,
        layout_root: Path | None = None,
    ) -> None:
        self.root = root
        self.config = config or sources.SourceSettings()
        self.layout_root = layout_root

    def path_of(self, digest: str) -> Path:
        return self.root / "sha256" / digests.hex_of(digests.parse(digest))

    async def ensure(self, ref: str, digest: str) -> bytes:
        """The verified bytes of `digest`, pulled from `ref` unless cached."""
        path = self.path_of(digest)
        cached = await asyncio.to_thread(_read_if_valid, path, digest)
        if cached is not None:
            return cached
        data = await self._fetch(ref, digest)
        await asyncio.to_thread(_write_atomically, path, data)
        return data

    async def _fetch(self, ref: str, digest: str) -> bytes:
        """Fetch by the tag or key as written, then hold the bytes to the pinned digest.

        Fetching by the name (not by digest) is what makes a moved tag visible: the
        store answers with what the name means now, and a mismatch names both digests
        instead of looking like a missing blob.
        """
        parsed = self._rooted(references.parse(ref))
        if parsed.digest is not None and parsed.digest != digest:
            raise spec_errors.InvalidReference(
                f"{parsed} is pinned to {parsed.digest} but the run pins {digest}", ref=ref
            )
        if parsed.tag is None and not isinstance(parsed, references.S3Ref):
            return (await sources.pull(parsed, digest=digest, config=self.config)).data
        by_name = references.unpinned(parsed)
        data: bytes = await sources.for_reference(by_name, self.config).fetch(by_name, digest=None)
        digests.verify(data, digest, ref=str(by_name))
        return data

    async def signature(self, ref: str, digest: str) -> bytes | None:
        """The signature stored beside `ref` for `digest` (not cached: a signature may be
        added or revoked by the publisher after the bytes were first pulled)."""
        parsed = self._rooted(references.parse(ref))
        return await sources.fetch_signature(parsed, digest, config=self.config)

    async def verified(
        self,
        ref: str,
        digest: str,
        data: bytes,
        *,
        verify: Mapping[str, Any] | None,
        namespace: str | None,
        policy: signers.SignaturePolicy | None,
    ) -> verifying.Verified | None:
        """The required signer's verified signature of `data` (None: none is required).

        `spec_errors.SignatureError` when it is missing, tampered or untrusted; only the
        fetch of the signature may fail with a transient `Unavailable`.
        """
        signer = signers.required(
            verify, namespace=namespace, policy=policy, digest=digest, ref=ref
        )
        if signer is None:
            return None
        bundle = await self.signature(ref, digest)
        return await asyncio.to_thread(
            verifying.verify, data, bundle, signer=signer, digest=digest, ref=ref
        )

    async def workflow(self, ref: str, digest: str) -> tuple[bytes, model.Workflow]:
        """The bytes and the parsed workflow (SpecError if it is not valid)."""
        data = await self.ensure(ref, digest)
        return data, documents.parse_workflow(data)

    async def bundle(
        self,
        data: bytes,
        *,
        digest: str,
        workflow: model.Workflow | None = None,
        check: Callable[[str, str, bytes], Awaitable[object]] | None = None,
    ) -> bytes:
        """The bytes a revision's runners get: `data` itself, or `data` bundled with every
        sub-workflow its steps call (`plnt.workflowspec.bundles`), each pulled into this
        cache, held to its digest and, with `check(ref, digest, bytes)`, to whatever else
        the caller requires of it (the pull: its signature). Errors name the calling step
        (`plnt.workflowspec.trees`)."""
        top = workflow or documents.parse_workflow(data)
        if not top.calls():
            return data

        async def fetch(ref: str, pinned: str) -> bytes:
            called = await self.ensure(ref, pinned)
            if check is not None:
                await check(ref, pinned, called)
            return called

        return bundles.pack(data, await trees.resolve(top, fetch=fetch, digest=digest))

    def _rooted(self, ref: references.Reference) -> references.Reference:
        if not isinstance(ref, references.LayoutRef) or Path(ref.path).is_absolute():
            return ref
        if self.layout_root is None or ".." in Path(ref.path).parts:
            raise spec_errors.InvalidReference(
                f"{ref}: a relative layout path must stay inside the layout root", ref=str(ref)
            )
        return dataclasses.replace(ref, path=str(self.layout_root / ref.path))


def _read_if_valid(path: Path, digest: str) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data if digests.compute(data) == digest else None


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".pull-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
