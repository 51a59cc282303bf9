"""References: where a spec lives, and optionally which bytes (its digest) are wanted.

Three forms, one per source:

    oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:HEX]   an OCI distribution registry
    s3://BUCKET/KEY[@sha256:HEX]                       an S3 or S3-compatible bucket
    oci-layout:PATH[:TAG][@sha256:HEX]                 an OCI image layout directory on disk

The digest is always the sha256 of the spec's own bytes (for OCI: the layer blob, not the
manifest), so one spec has one digest wherever it is stored. A reference with a digest is
*pinned*; `pinned(ref, digest)` makes one and `str()` renders it back in the same form.
Parsing is pure: no I/O here. Malformed input raises `errors.InvalidReference`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from plnt.workflowspec import digests, errors

OCI_SCHEME = "oci://"
S3_SCHEME = "s3://"
LAYOUT_SCHEME = "oci-layout:"

# The grammar of the OCI distribution spec (repository components and tags).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)
# S3 bucket names: 3-63 chars of lowercase letters, digits, dots and hyphens.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class OciRef:
    """An artifact in an OCI distribution registry."""

    host: str
    repository: str
    tag: str | None = None
    digest: digests.Digest | None = None

    def __str__(self) -> str:
        return f"{OCI_SCHEME}{self.host}/{self.repository}{_suffix(self.tag, self.digest)}"

    @property
    def hostname(self) -> str:
        """The host without its port (and without IPv6 brackets)."""
        if self.host.startswith("["):
            return self.host[1:].split("]", 1)[0]
        return self.host.split(":", 1)[0]


@dataclass(frozen=True)
class S3Ref:
    """An object in an S3 (or S3-compatible) bucket."""

    bucket: str
    key: str
    digest: digests.Digest | None = None

    def __str__(self) -> str:
        pin = f"@{self.digest}" if self.digest else ""
        return f"{S3_SCHEME}{self.bucket}/{self.key}{pin}"

    @property
    def tag(self) -> str | None:
        """S3 objects have keys, not tags."""
        return None


@dataclass(frozen=True)
class LayoutRef:
    """A manifest in an OCI image layout directory, by tag and/or by spec digest."""

    path: str
    tag: str | None = None
    digest: digests.Digest | None = None

    def __str__(self) -> str:
        return f"{LAYOUT_SCHEME}{self.path}{_suffix(self.tag, self.digest)}"


Reference = OciRef | S3Ref | LayoutRef


def parse(text: str) -> Reference:
    """Parse a reference string; raise `errors.InvalidReference` naming what is wrong."""
    body, digest = _split_digest(text)
    if body.startswith(OCI_SCHEME):
        return _parse_oci(text, body[len(OCI_SCHEME) :], digest)
    if body.startswith(S3_SCHEME):
        return _parse_s3(text, body[len(S3_SCHEME) :], digest)
    if body.startswith(LAYOUT_SCHEME):
        return _parse_layout(text, body[len(LAYOUT_SCHEME) :], digest)
    raise errors.InvalidReference(
        f"unknown reference {text!r}: expected oci://HOST/REPO:TAG, s3://BUCKET/KEY "
        "or oci-layout:PATH:TAG",
        ref=text,
    )


def pinned(ref: Reference, digest: str) -> Reference:
    """The same reference pinned to `digest` (validated)."""
    return dataclasses.replace(ref, digest=digests.parse(digest))


def unpinned(ref: Reference) -> Reference:
    """The same reference without its digest."""
    return dataclasses.replace(ref, digest=None)


def _suffix(tag: str | None, digest: str | None) -> str:
    return (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _split_digest(text: str) -> tuple[str, digests.Digest | None]:
    body, at, tail = text.rpartition("@")
    if not at or not tail.startswith(f"{digests.ALGORITHM}:"):
        return text, None
    try:
        return body, digests.parse(tail)
    except errors.InvalidDigest as exc:
        raise errors.InvalidReference(f"invalid reference {text!r}: {exc}", ref=text) from exc


def _split_tag(rest: str) -> tuple[str, str | None]:
    """Split `NAME:TAG` where the tag follows the last ':' after the last '/'."""
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        return rest[:colon], rest[colon + 1 :]
    return rest, None


def _parse_oci(text: str, rest: str, digest: digests.Digest | None) -> OciRef:
    host, slash, path = rest.partition("/")
    if not slash or not _HOST.fullmatch(host):
        raise errors.InvalidReference(
            f"invalid OCI reference {text!r}: expected oci://HOST[:PORT]/REPOSITORY[:TAG]", ref=text
        )
    repository, tag = _split_tag(path)
    if not _REPOSITORY.fullmatch(repository):
        raise errors.InvalidReference(
            f"invalid OCI reference {text!r}: repository {repository!r} must be lowercase "
            "path components of letters, digits and separators",
            ref=text,
        )
    if tag is not None and not _TAG.fullmatch(tag):
        raise errors.InvalidReference(f"invalid OCI reference {text!r}: bad tag {tag!r}", ref=text)
    return OciRef(host=host, repository=repository, tag=tag, digest=digest)


def _parse_s3(text: str, rest: str, digest: digests.Digest | None) -> S3Ref:
    bucket, slash, key = rest.partition("/")
    if not slash or not key or not _BUCKET.fullmatch(bucket):
        raise errors.InvalidReference(
            f"invalid S3 reference {text!r}: expected s3://BUCKET/KEY", ref=text
        )
    return S3Ref(bucket=bucket, key=key, digest=digest)


def _parse_layout(text: str, rest: str, digest: digests.Digest | None) -> LayoutRef:
    path, tag = _split_tag(rest)
    if not path:
        raise errors.InvalidReference(
            f"invalid layout reference {text!r}: expected oci-layout:PATH[:TAG]", ref=text
        )
    if tag is not None and not _TAG.fullmatch(tag):
        raise errors.InvalidReference(
            f"invalid layout reference {text!r}: bad tag {tag!r}", ref=text
        )
    return LayoutRef(path=path, tag=tag, digest=digest)
