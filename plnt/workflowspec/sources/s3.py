"""S3 and S3-compatible stores, through botocore run in a worker thread.

botocore signs every request with SigV4 (including the payload hash and the S3-specific
canonicalisation of keys), resolves credentials through the standard AWS chain, and retries
transient failures in its "standard" mode; this module only bounds those retries and sizes
and translates botocore's exceptions into `errors` once. The object's bytes are the spec;
the spec digest is also stored as object metadata (`x-amz-meta-plnt-digest`) for humans, but
a pull always re-hashes what it read. A signature is a sibling object,
`KEY.sha256-<hex>.sig` (the Sigstore bundle), so each pinned version keeps its own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Literal

import botocore.config
import botocore.exceptions
import botocore.session

from plnt.workflowspec import digests, errors, references
from plnt.workflowspec.sources import artifacts, settings

_NOT_FOUND = frozenset({"NoSuchKey", "NoSuchBucket", "404", "NotFound"})
_DENIED = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "403",
        "ExpiredToken",
        "InvalidToken",
        "AuthorizationHeaderMalformed",
    }
)


class S3Source:
    """Publish to and fetch from S3 buckets."""

    def __init__(self, s3: settings.S3Settings, limits: settings.Limits) -> None:
        self._settings = s3
        self._limits = limits
        self._client: Any = None
        self._lock = threading.Lock()

    async def fetch(self, ref: references.S3Ref, *, digest: digests.Digest | None) -> bytes:
        """The object's bytes, verified against `digest` when given."""
        return await asyncio.to_thread(self._fetch, ref, digest)

    async def publish(
        self, data: bytes, ref: references.S3Ref, *, kind: artifacts.Kind = artifacts.WORKFLOW
    ) -> references.S3Ref:
        """Put the spec (or dataset) at `ref`'s key; return the reference pinned to its digest.

        The object's Content-Type is the kind's media type; a pull reads the bytes whatever
        it says."""
        if len(data) > self._limits.max_bytes:
            raise errors.TooLarge(
                f"{ref}: {len(data)} bytes exceeds the limit of {self._limits.max_bytes} bytes",
                limit=self._limits.max_bytes,
                size=len(data),
                ref=str(ref),
            )
        return await asyncio.to_thread(self._publish, data, ref, kind)

    async def attach_signature(self, ref: references.S3Ref, bundle: bytes) -> None:
        """Store `bundle` as the sibling object signing the pinned `ref`."""
        assert ref.digest is not None, "a signature is attached to a pinned reference"
        key = signature_key(ref.key, ref.digest)
        with self._translated(ref):
            await asyncio.to_thread(
                self._s3().put_object,
                Bucket=ref.bucket,
                Key=key,
                Body=bundle,
                ContentType=artifacts.SIGNATURE_ARTIFACT_TYPE,
            )

    async def fetch_signature(self, ref: references.S3Ref, digest: digests.Digest) -> bytes | None:
        """The signature object stored beside `ref` for `digest`, or None."""
        sibling = references.S3Ref(bucket=ref.bucket, key=signature_key(ref.key, digest))
        try:
            return await asyncio.to_thread(self._fetch, sibling, None)
        except errors.NotFound:
            return None

    async def keys(self, bucket: str, prefix: str) -> list[tuple[str, str]]:
        """(key, ETag) of every object under `prefix`, in key order (all pages).

        The ETag changes whenever the bytes do, so a lister may keep what it read of a key
        until its ETag changes; it is never trusted as the digest.
        """
        return await asyncio.to_thread(self._keys, bucket, prefix)

    def _keys(self, bucket: str, prefix: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        ref = references.S3Ref(bucket=bucket, key=prefix or "/")
        with self._translated(ref):
            pages = (
                self._s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            )
            for page in pages:
                for item in page.get("Contents", []):
                    found.append((str(item["Key"]), str(item.get("ETag", ""))))
        return found

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        cfg = self._settings
        session = botocore.session.Session(profile=cfg.profile)
        addressing = (
            "path" if cfg.path_style or (cfg.path_style is None and cfg.endpoint_url) else "auto"
        )
        config = botocore.config.Config(
            signature_version="s3v4",
            connect_timeout=self._limits.timeout,
            read_timeout=self._limits.timeout,
            retries={"mode": "standard", "total_max_attempts": max(1, self._limits.attempts)},
            s3={"addressing_style": addressing},
        )
        return session.create_client(
            "s3",
            region_name=cfg.region or session.get_config_variable("region") or "us-east-1",
            endpoint_url=cfg.endpoint_url,
            aws_access_key_id=cfg.access_key_id,
            aws_secret_access_key=cfg.secret_access_key,
            aws_session_token=cfg.session_token,
            config=config,
        )

    def _fetch(self, ref: references.S3Ref, digest: digests.Digest | None) -> bytes:
        text = str(ref)
        limit = self._limits.max_bytes
        with self._translated(ref):
            response = self._s3().get_object(Bucket=ref.bucket, Key=ref.key)
            body = response["Body"]
            try:
                size = int(response.get("ContentLength", 0))
                if size > limit:
                    raise errors.TooLarge(
                        f"{text}: {size} bytes exceeds the limit of {limit} bytes",
                        limit=limit,
                        size=size,
                        ref=text,
                    )
                data: bytes = body.read(limit + 1)
            finally:
                body.close()
        if len(data) > limit:
            raise errors.TooLarge(
                f"{text}: the object exceeds {limit} bytes", limit=limit, ref=text
            )
        if digest is not None:
            digests.verify(data, digest, ref=text)
        return data

    def _publish(
        self, data: bytes, ref: references.S3Ref, kind: artifacts.Kind
    ) -> references.S3Ref:
        digest = digests.compute(data)
        with self._translated(ref):
            self._s3().put_object(
                Bucket=ref.bucket,
                Key=ref.key,
                Body=data,
                ContentType=kind.media_type,
                Metadata={"plnt-digest": digest},
            )
        return references.S3Ref(bucket=ref.bucket, key=ref.key, digest=digest)

    def _translated(self, ref: references.S3Ref) -> _Translating:
        return _Translating(str(ref), attempts=max(1, self._limits.attempts))


def signature_key(key: str, digest: digests.Digest) -> str:
    """The key of the signature of `key`'s version whose bytes hash to `digest`."""
    return f"{key}.{artifacts.signature_tag(digest)}"


class _Translating:
    """Context manager turning botocore exceptions into `errors`, with the cause chained."""

    def __init__(self, ref: str, *, attempts: int) -> None:
        self._ref = ref
        self._attempts = attempts

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> Literal[False]:
        if exc is None or isinstance(exc, errors.SourceError):
            return False
        ref = self._ref
        if isinstance(exc, botocore.exceptions.ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            message = str(error.get("Message", "")) or code
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in _NOT_FOUND:
                raise errors.NotFound(f"{ref}: not found ({code})", ref=ref) from exc
            if code in _DENIED or status in (401, 403):
                raise errors.AuthenticationFailed(
                    f"{ref}: the store refused the credentials: {code}: {message}", ref=ref
                ) from exc
            if status == 429 or status >= 500 or code in ("SlowDown", "ServiceUnavailable"):
                raise errors.Unavailable(
                    f"{ref}: {code}: {message} (gave up after {self._attempts} attempts)",
                    attempts=self._attempts,
                    ref=ref,
                ) from exc
            raise errors.ProtocolError(f"{ref}: {code}: {message}", ref=ref) from exc
        if isinstance(
            exc,
            botocore.exceptions.NoCredentialsError | botocore.exceptions.PartialCredentialsError,
        ):
            raise errors.AuthenticationFailed(
                f"{ref}: no S3 credentials found (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or explicit settings)",
                ref=ref,
            ) from exc
        if isinstance(
            exc, botocore.exceptions.HTTPClientError | botocore.exceptions.ConnectionError
        ):
            raise errors.Unavailable(
                f"{ref}: {exc} (gave up after {self._attempts} attempts)",
                attempts=self._attempts,
                ref=ref,
            ) from exc
        if isinstance(exc, botocore.exceptions.BotoCoreError):
            raise errors.ProtocolError(f"{ref}: {exc}", ref=ref) from exc
        return False
