"""Digests: a spec's identity is the sha256 of its exact bytes.

Nothing is canonicalised first: re-serialising YAML would change the digest of a file its
author already published, so the bytes on the wire are the bytes that are hashed. Every pull
passes through `verify`, which raises `errors.DigestMismatch` naming both digests.
"""

from __future__ import annotations

import hashlib
import re
from typing import NewType

from plnt.workflowspec import errors

Digest = NewType("Digest", str)
"""A validated `sha256:<64 lowercase hex>` string."""

ALGORITHM = "sha256"
_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")


def compute(data: bytes) -> Digest:
    """Return `sha256:<hex>` of `data`."""
    return Digest(f"{ALGORITHM}:{hashlib.sha256(data).hexdigest()}")


def is_valid(value: str) -> bool:
    """True when `value` is a well-formed sha256 digest string."""
    return _PATTERN.fullmatch(value) is not None


def parse(value: str) -> Digest:
    """Validate a digest string; raise `errors.InvalidDigest` naming it when malformed."""
    if not is_valid(value):
        raise errors.InvalidDigest(
            f"invalid digest {value!r}: expected 'sha256:' followed by 64 lowercase hex digits"
        )
    return Digest(value)


def hex_of(digest: Digest) -> str:
    """The hex part of a digest (the blob file name in an OCI layout)."""
    return digest.split(":", 1)[1]


def verify(data: bytes, expected: str, *, ref: str = "") -> Digest:
    """Return the digest of `data` if it equals `expected`, else raise `DigestMismatch`."""
    pinned = parse(expected)
    actual = compute(data)
    if actual != pinned:
        raise errors.DigestMismatch(expected=pinned, actual=actual, ref=ref)
    return actual
