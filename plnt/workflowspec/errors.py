"""Errors of pulling and publishing workflow specs: about references, bytes and stores.

    SourceError
    ├── InvalidReference      a reference string that no source understands
    ├── InvalidDigest         a digest string that is not `sha256:<64 lowercase hex>`
    ├── DigestMismatch        the bytes fetched do not hash to the pinned digest
    ├── NotFound              the store answered, and the tag, digest or key is not there
    ├── AuthenticationFailed  the store refused the credentials (or demanded some)
    ├── TooLarge              the content exceeds the size limit; it was not read in full
    ├── ProtocolError         the store answered something that is not a plnt workflow artifact
    ├── Unavailable           the store could not be reached or kept failing (after retries)
    └── SignatureError        the bytes are what was pinned, but not from whom was required
        ├── SignatureMissing  no signature is stored beside the artifact
        ├── SignatureInvalid  the signature does not cover these bytes (tampered either side)
        └── SignerUntrusted   a valid signature, by a key, CA, identity or certificate that
                              the verifier does not trust (or no trusted signer was named)

Each source translates its library's exceptions into these exactly once, chaining the cause,
so callers (the pull saga step, `plnt push`) never see requests, botocore or OS errors.
Only `Unavailable` is transient: it is the one error sources retry. Signature errors are
raised by `verifying` (never by a source) and are final: a retry fetches the same bytes.
"""

from __future__ import annotations


class SourceError(Exception):
    """Base of every pull or publish failure."""

    def __init__(self, message: str, *, ref: str = "") -> None:
        super().__init__(message)
        self.ref = ref


class InvalidReference(SourceError, ValueError):
    """The reference string has no known scheme or is malformed."""


class InvalidDigest(SourceError, ValueError):
    """A digest string is not `sha256:` followed by 64 lowercase hex digits."""


class DigestMismatch(SourceError):
    """The fetched bytes hash to `actual`, but the reference pinned `expected`."""

    def __init__(self, *, expected: str, actual: str, ref: str = "") -> None:
        where = f" for {ref}" if ref else ""
        super().__init__(
            f"digest mismatch{where}: expected {expected}, got {actual}; the content was refused",
            ref=ref,
        )
        self.expected = expected
        self.actual = actual


class NotFound(SourceError):
    """The tag, digest, object key or layout entry does not exist."""


class AuthenticationFailed(SourceError):
    """The store rejected the credentials given, or requires credentials none were given."""


class TooLarge(SourceError):
    """The content is larger than the configured limit."""

    def __init__(self, message: str, *, limit: int, size: int | None = None, ref: str = "") -> None:
        super().__init__(message, ref=ref)
        self.limit = limit
        self.size = size


class ProtocolError(SourceError):
    """The store answered with something that is not a well-formed plnt workflow artifact."""


class Unavailable(SourceError):
    """The store could not be reached, timed out, or answered 5xx/429 on every attempt."""

    def __init__(self, message: str, *, attempts: int = 1, ref: str = "") -> None:
        super().__init__(message, ref=ref)
        self.attempts = attempts


class SignatureError(SourceError):
    """The signature check refused the artifact: `digest` is what was checked, `expected` the
    signer that was required (as `verifying.Signer.describe` names it)."""

    def __init__(self, message: str, *, digest: str, expected: str, ref: str = "") -> None:
        super().__init__(message, ref=ref)
        self.digest = digest
        self.expected = expected


class SignatureMissing(SignatureError):
    """No signature of the digest is stored where the artifact lives."""


class SignatureInvalid(SignatureError):
    """The stored signature is malformed, or does not cover the pinned bytes."""


class SignerUntrusted(SignatureError):
    """The signature is by someone the verifier does not trust, or none was named."""
