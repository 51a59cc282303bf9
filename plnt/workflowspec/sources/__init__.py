"""Where specs come from: one async interface over OCI layouts, OCI registries and S3.

Contract: `pull` returns bytes whose sha256 equals the pinned digest, or raises an
`errors.SourceError`; it never returns unverified bytes for a pinned reference. `publish`
stores bytes and returns the reference pinned to their digest; its `kind` (a workflow spec
unless told, or an evaluation dataset) only labels the artifact, and a pull takes either.
Every source bounds sizes (`Limits.max_bytes`), time (per-request timeouts) and retries
(transient failures only).
A signature (`publish(signature=…)`, a Sigstore bundle) is stored where the artifact lives
and found again by the artifact's digest (`fetch_signature`); checking it is `verifying`'s.
Blocking libraries (oras/requests, botocore, file I/O) run in worker threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from plnt.workflowspec import digests, errors, references
from plnt.workflowspec.sources import artifacts
from plnt.workflowspec.sources.settings import (
    Limits,
    RegistrySettings,
    S3Settings,
    SourceSettings,
)

__all__ = [
    "Limits",
    "Pulled",
    "RegistrySettings",
    "S3Settings",
    "Source",
    "SourceSettings",
    "fetch_signature",
    "for_reference",
    "publish",
    "pull",
]


RefT_contra = TypeVar("RefT_contra", bound=references.Reference, contravariant=True)


class Source(Protocol[RefT_contra]):
    """One kind of store, serving one kind of reference."""

    async def fetch(self, ref: RefT_contra, *, digest: digests.Digest | None) -> bytes:
        """The bytes at `ref`; verified against `digest` when it is given."""
        ...

    async def publish(
        self, data: bytes, ref: RefT_contra, *, kind: artifacts.Kind = artifacts.WORKFLOW
    ) -> references.Reference:
        """Store `data` at `ref` as a `kind` artifact; return `ref` pinned to its digest."""
        ...

    async def attach_signature(self, ref: RefT_contra, bundle: bytes) -> None:
        """Store `bundle` beside the artifact the pinned `ref` names, as its signature."""
        ...

    async def fetch_signature(self, ref: RefT_contra, digest: digests.Digest) -> bytes | None:
        """The signature stored beside `ref` for the bytes `digest`, or None if there is none."""
        ...


@dataclass(frozen=True)
class Pulled:
    """A verified spec: its bytes, their digest, and the pinned reference it came from."""

    data: bytes
    digest: digests.Digest
    ref: references.Reference


def for_reference(ref: references.Reference, config: SourceSettings) -> Source[Any]:
    """The source that serves `ref`."""
    # Imported here so that importing the interface does not import oras or botocore.
    if isinstance(ref, references.OciRef):
        from plnt.workflowspec.sources import oci_registry

        return oci_registry.OciRegistrySource(config.registry, config.limits)
    if isinstance(ref, references.S3Ref):
        from plnt.workflowspec.sources import s3

        return s3.S3Source(config.s3, config.limits)
    from plnt.workflowspec.sources import oci_layout

    return oci_layout.OciLayoutSource(config.limits)


async def pull(
    ref: str | references.Reference,
    *,
    digest: str | None = None,
    config: SourceSettings | None = None,
) -> Pulled:
    """Fetch and verify a spec.

    The expected digest comes from `digest` or from the reference's `@sha256:…`; when both are
    given they must agree. Without any digest the bytes are still checked against the
    descriptor the store announced (OCI) and the result carries their digest, so the caller
    can pin it.
    """
    parsed = references.parse(ref) if isinstance(ref, str) else ref
    expected = parsed.digest
    if digest is not None:
        wanted = digests.parse(digest)
        if expected is not None and expected != wanted:
            raise errors.InvalidReference(
                f"{parsed} is pinned to {expected} but {wanted} was requested", ref=str(parsed)
            )
        expected = wanted
    source = for_reference(parsed, config or SourceSettings())
    data = await source.fetch(parsed, digest=expected)
    actual = (
        digests.verify(data, expected, ref=str(parsed))
        if expected is not None
        else digests.compute(data)
    )
    return Pulled(data=data, digest=actual, ref=references.pinned(parsed, actual))


async def publish(
    data: bytes,
    ref: str | references.Reference,
    *,
    config: SourceSettings | None = None,
    kind: artifacts.Kind = artifacts.WORKFLOW,
    signature: bytes | None = None,
) -> references.Reference:
    """Store `data` at `ref` (a tag or key, not a digest) as a `kind` artifact, and
    `signature` (a bundle `signing.sign` made of `data`) beside it; return the pinned
    reference."""
    parsed = references.parse(ref) if isinstance(ref, str) else ref
    if parsed.digest is not None:
        raise errors.InvalidReference(
            f"{parsed}: publish to a tag or key; the digest is computed from the bytes",
            ref=str(parsed),
        )
    source = for_reference(parsed, config or SourceSettings())
    pinned = await source.publish(data, parsed, kind=kind)
    if signature is not None:
        await source.attach_signature(pinned, signature)
    return pinned


async def fetch_signature(
    ref: str | references.Reference,
    digest: str,
    *,
    config: SourceSettings | None = None,
) -> bytes | None:
    """The signature stored beside `ref` for the bytes `digest` (unverified), or None."""
    parsed = references.parse(ref) if isinstance(ref, str) else ref
    wanted = digests.parse(digest)
    return await for_reference(parsed, config or SourceSettings()).fetch_signature(parsed, wanted)
