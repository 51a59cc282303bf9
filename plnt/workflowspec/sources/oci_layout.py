"""An OCI image layout directory on disk: the embedded default registry.

Layout (OCI image-spec "image layout"): `oci-layout`, `index.json` listing one manifest per
tag (annotation `org.opencontainers.image.ref.name`), and every blob under
`blobs/sha256/<hex>`. Writes are atomic (temporary file + rename) and `index.json` updates
are serialised with an advisory lock, so concurrent publishers never leave a torn index.
File I/O runs in a worker thread to keep the event loop free. Local disks have no transient
failures worth retrying, so nothing here retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plnt.workflowspec import digests, errors, references
from plnt.workflowspec.sources import artifacts, settings

LAYOUT_FILE = "oci-layout"
INDEX_FILE = "index.json"
LAYOUT_VERSION = {"imageLayoutVersion": "1.0.0"}
DEFAULT_TAG = "latest"


class OciLayoutSource:
    """Publish to and fetch from OCI image layout directories."""

    def __init__(self, limits: settings.Limits) -> None:
        self._limits = limits

    async def fetch(self, ref: references.LayoutRef, *, digest: digests.Digest | None) -> bytes:
        """The spec's bytes, by `digest` when given (the tag is then ignored), else by tag."""
        return await asyncio.to_thread(self._fetch, ref, digest)

    async def publish(
        self,
        data: bytes,
        ref: references.LayoutRef,
        *,
        kind: artifacts.Kind = artifacts.WORKFLOW,
    ) -> references.LayoutRef:
        """Write the spec (or dataset), its manifest and the tag; return the pinned reference."""
        return await asyncio.to_thread(self._publish, data, ref, kind)

    async def attach_signature(self, ref: references.LayoutRef, bundle: bytes) -> None:
        """Store `bundle` as the signature of the pinned `ref` (artifacts' module docstring)."""
        await asyncio.to_thread(self._attach, ref, bundle)

    async def fetch_signature(
        self, ref: references.LayoutRef, digest: digests.Digest
    ) -> bytes | None:
        """The signature stored for `digest` in `ref`'s layout, or None."""
        return await asyncio.to_thread(self._fetch_signature, ref, digest)

    async def tags(self, ref: references.LayoutRef) -> list[str]:
        """Every tag `index.json` names, in its order (NotFound when it is no layout)."""
        return await asyncio.to_thread(self._tags, ref)

    async def resolve(self, ref: references.LayoutRef) -> artifacts.Descriptor:
        """The layer `ref`'s tag names (its digest and media type: a spec's or a dataset's),
        from its manifest (no spec is read)."""
        return await asyncio.to_thread(self._resolve, ref)

    def _tags(self, ref: references.LayoutRef) -> list[str]:
        root, text = Path(ref.path), str(ref)
        if not (root / LAYOUT_FILE).is_file():
            raise errors.NotFound(f"{text}: {root} is not an OCI image layout", ref=text)
        tags = []
        for entry in _read_index(root, ref=text, limit=self._limits.max_bytes).get("manifests", []):
            tag = (entry.get("annotations") or {}).get(artifacts.REF_NAME_ANNOTATION)
            if isinstance(tag, str) and tag not in tags:
                tags.append(tag)
        return tags

    def _resolve(self, ref: references.LayoutRef) -> artifacts.Descriptor:
        root, text = Path(ref.path), str(ref)
        if not (root / LAYOUT_FILE).is_file():
            raise errors.NotFound(f"{text}: {root} is not an OCI image layout", ref=text)
        manifest_digest = _lookup_tag(
            root, ref.tag or DEFAULT_TAG, ref=text, limit=self._limits.max_bytes
        )
        manifest = _read_blob(
            root, manifest_digest, limit=self._limits.max_manifest_bytes, ref=text
        )
        layer = artifacts.spec_layer(manifest, ref=text)
        _check_size(layer.size, self._limits.max_bytes, ref=text)
        return layer

    def _fetch(self, ref: references.LayoutRef, digest: digests.Digest | None) -> bytes:
        root = Path(ref.path)
        text = str(ref)
        if not (root / LAYOUT_FILE).is_file():
            raise errors.NotFound(f"{text}: {root} is not an OCI image layout", ref=text)
        if digest is None:
            tag = ref.tag or DEFAULT_TAG
            manifest_digest = _lookup_tag(root, tag, ref=text, limit=self._limits.max_bytes)
            manifest = _read_blob(
                root, manifest_digest, limit=self._limits.max_manifest_bytes, ref=text
            )
            layer = artifacts.spec_layer(manifest, ref=text)
            _check_size(layer.size, self._limits.max_bytes, ref=text)
            digest = layer.digest
        return _read_blob(root, digest, limit=self._limits.max_bytes, ref=text)

    def _publish(
        self, data: bytes, ref: references.LayoutRef, kind: artifacts.Kind
    ) -> references.LayoutRef:
        _check_size(len(data), self._limits.max_bytes, ref=str(ref))
        root = Path(ref.path)
        tag = ref.tag or DEFAULT_TAG
        try:
            (root / "blobs" / digests.ALGORITHM).mkdir(parents=True, exist_ok=True)
            if not (root / LAYOUT_FILE).exists():
                _write_atomically(root / LAYOUT_FILE, json.dumps(LAYOUT_VERSION).encode())
            spec_digest = _write_blob(root, data)
            _write_blob(root, artifacts.EMPTY_CONFIG)
            manifest = artifacts.encode(artifacts.manifest_for(data, kind))
            manifest_digest = _write_blob(root, manifest)
            with _locked(root):
                _tag(
                    root, tag, manifest_digest, size=len(manifest), artifact_type=kind.artifact_type
                )
        except OSError as exc:
            raise errors.Unavailable(
                f"{ref}: cannot write the layout: {exc}", ref=str(ref)
            ) from exc
        return references.LayoutRef(path=ref.path, tag=tag, digest=spec_digest)

    def _attach(self, ref: references.LayoutRef, bundle: bytes) -> None:
        root, text = Path(ref.path), str(ref)
        assert ref.digest is not None, "a signature is attached to a pinned reference"
        tag = ref.tag or DEFAULT_TAG
        subject_digest = _lookup_tag(root, tag, ref=text, limit=self._limits.max_bytes)
        subject = artifacts.Descriptor(
            artifacts.MANIFEST_MEDIA_TYPE,
            subject_digest,
            _blob_path(root, subject_digest).stat().st_size,
        )
        try:
            _write_blob(root, bundle)
            manifest = artifacts.encode(artifacts.signature_manifest(bundle, subject))
            manifest_digest = _write_blob(root, manifest)
            with _locked(root):
                _tag(
                    root,
                    artifacts.signature_tag(ref.digest),
                    manifest_digest,
                    size=len(manifest),
                    artifact_type=artifacts.SIGNATURE_ARTIFACT_TYPE,
                )
        except OSError as exc:
            raise errors.Unavailable(f"{ref}: cannot write the signature: {exc}", ref=text) from exc

    def _fetch_signature(self, ref: references.LayoutRef, digest: digests.Digest) -> bytes | None:
        root, text = Path(ref.path), str(ref)
        limit = self._limits.max_manifest_bytes
        try:
            manifest_digest = _lookup_tag(
                root, artifacts.signature_tag(digest), ref=text, limit=self._limits.max_bytes
            )
        except errors.NotFound:
            return None
        manifest = _read_blob(root, manifest_digest, limit=limit, ref=text)
        layer = artifacts.signature_layer(manifest, ref=text)
        return _read_blob(root, layer.digest, limit=limit, ref=text)


def _check_size(size: int, limit: int, *, ref: str) -> None:
    if size > limit:
        raise errors.TooLarge(
            f"{ref}: {size} bytes exceeds the limit of {limit} bytes",
            limit=limit,
            size=size,
            ref=ref,
        )


def _blob_path(root: Path, digest: digests.Digest) -> Path:
    return root / "blobs" / digests.ALGORITHM / digests.hex_of(digest)


def _read_blob(root: Path, digest: digests.Digest, *, limit: int, ref: str) -> bytes:
    path = _blob_path(root, digest)
    try:
        with path.open("rb") as blob:
            _check_size(os.fstat(blob.fileno()).st_size, limit, ref=ref)
            data = blob.read(limit + 1)
    except FileNotFoundError as exc:
        raise errors.NotFound(f"{ref}: blob {digest} is not in the layout", ref=ref) from exc
    except OSError as exc:
        raise errors.Unavailable(f"{ref}: cannot read blob {digest}: {exc}", ref=ref) from exc
    _check_size(len(data), limit, ref=ref)
    digests.verify(data, digest, ref=ref)
    return data


def _lookup_tag(root: Path, tag: str, *, ref: str, limit: int) -> digests.Digest:
    for entry in _read_index(root, ref=ref, limit=limit).get("manifests", []):
        annotations = entry.get("annotations") or {}
        if annotations.get(artifacts.REF_NAME_ANNOTATION) == tag:
            try:
                return digests.parse(str(entry.get("digest", "")))
            except errors.InvalidDigest as exc:
                raise errors.ProtocolError(f"{ref}: index.json entry: {exc}", ref=ref) from exc
    raise errors.NotFound(f"{ref}: tag {tag!r} is not in the layout", ref=ref)


def _read_index(root: Path, *, ref: str, limit: int) -> dict[str, Any]:
    path = root / INDEX_FILE
    try:
        with path.open("rb") as index:
            raw = index.read(limit + 1)
    except FileNotFoundError:
        return {"schemaVersion": 2, "mediaType": artifacts.INDEX_MEDIA_TYPE, "manifests": []}
    _check_size(len(raw), limit, ref=ref)
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise errors.ProtocolError(f"{ref}: index.json is not JSON", ref=ref) from exc
    if not isinstance(document, dict) or not isinstance(document.get("manifests", []), list):
        raise errors.ProtocolError(f"{ref}: index.json is not an OCI image index", ref=ref)
    return document


def _tag(
    root: Path, tag: str, manifest_digest: digests.Digest, *, size: int, artifact_type: str
) -> None:
    index = _read_index(root, ref=str(root), limit=64 * settings.MIB)
    kept = [
        entry
        for entry in index.get("manifests", [])
        if (entry.get("annotations") or {}).get(artifacts.REF_NAME_ANNOTATION) != tag
    ]
    kept.append(
        {
            "mediaType": artifacts.MANIFEST_MEDIA_TYPE,
            "artifactType": artifact_type,
            "digest": manifest_digest,
            "size": size,
            "annotations": {artifacts.REF_NAME_ANNOTATION: tag},
        }
    )
    index.update(schemaVersion=2, mediaType=artifacts.INDEX_MEDIA_TYPE, manifests=kept)
    _write_atomically(root / INDEX_FILE, json.dumps(index, indent=2).encode())


def _write_blob(root: Path, data: bytes) -> digests.Digest:
    digest = digests.compute(data)
    path = _blob_path(root, digest)
    if not path.exists():
        _write_atomically(path, data)
    return digest


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with (root / ".index.lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
