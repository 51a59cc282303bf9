"""The OCI artifacts that carry workflow specs and evaluation datasets: media types, manifests.

Each is published as an OCI image manifest (the form every OCI 1.0 registry accepts) with
the empty config descriptor and exactly one layer holding the document's bytes; the layer
digest is the document's digest. A `Kind` says which: a workflow spec has `artifactType`
`application/vnd.plnt.workflow.v1` and a layer of `application/vnd.plnt.workflow.v1+yaml`;
an evaluation dataset has `application/vnd.plnt.dataset.v1` and a layer of
`application/vnd.plnt.dataset.v1+yaml` (a YAML/JSON document) or `…+jsonl` (JSON Lines).

A pull takes the one plnt layer of either kind: the quality gate fetches its dataset through
the same spec cache and sources as a spec, and what the bytes are is for their reader to
check (a dataset read as a spec fails the spec's loader, naming why). The catalog lists
only workflow artifacts. Registries and OCI layouts share this module.

A signature (`plnt push --sign-key`, a Sigstore bundle made by model-signing) is attached
to the artifact it signs: an image manifest of `artifactType`
`application/vnd.dev.sigstore.bundle.v0.3+json` whose one layer is the bundle and whose
`subject` is the artifact's manifest (so registries with the OCI 1.1 referrers API list it),
tagged `sha256-<spec hex>.sig`: a pull knows the spec's digest, not the manifest's, and a
tag works on every registry, OCI 1.0 ones and layouts included.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from plnt.workflowspec import digests, errors

ARTIFACT_TYPE = "application/vnd.plnt.workflow.v1"
WORKFLOW_MEDIA_TYPE = "application/vnd.plnt.workflow.v1+yaml"
DATASET_ARTIFACT_TYPE = "application/vnd.plnt.dataset.v1"
DATASET_MEDIA_TYPE = "application/vnd.plnt.dataset.v1+yaml"
DATASET_LINES_MEDIA_TYPE = "application/vnd.plnt.dataset.v1+jsonl"
EMPTY_CONFIG_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = ", ".join((MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE))
TITLE_ANNOTATION = "org.opencontainers.image.title"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"
SPEC_FILENAME = "workflow.yaml"
SIGNATURE_ARTIFACT_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
"""A signature: a Sigstore bundle (v0.3), the artifact type and its layer's media type."""
SIGNATURE_FILENAME = "signature.sigstore.json"


@dataclass(frozen=True)
class Kind:
    """What an artifact holds: its `artifactType`, its layer's media type, the file it names."""

    artifact_type: str
    media_type: str
    filename: str


WORKFLOW = Kind(ARTIFACT_TYPE, WORKFLOW_MEDIA_TYPE, SPEC_FILENAME)
DATASET = Kind(DATASET_ARTIFACT_TYPE, DATASET_MEDIA_TYPE, "dataset.yaml")
DATASET_LINES = Kind(DATASET_ARTIFACT_TYPE, DATASET_LINES_MEDIA_TYPE, "dataset.jsonl")
CONTENT_MEDIA_TYPES = (WORKFLOW_MEDIA_TYPE, DATASET_MEDIA_TYPE, DATASET_LINES_MEDIA_TYPE)
"""The layers a pull takes: one of them, exactly, per manifest."""


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor: what to fetch, how big it is, what it is."""

    media_type: str
    digest: digests.Digest
    size: int

    def to_json(self) -> dict[str, Any]:
        """The descriptor as it appears in a manifest."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def config_descriptor() -> Descriptor:
    """The OCI empty config (`{}`), which artifacts without configuration use."""
    return Descriptor(EMPTY_CONFIG_MEDIA_TYPE, digests.compute(EMPTY_CONFIG), len(EMPTY_CONFIG))


def spec_descriptor(spec: bytes, kind: Kind = WORKFLOW) -> Descriptor:
    """The layer descriptor of a spec's (or a dataset's) bytes."""
    return Descriptor(kind.media_type, digests.compute(spec), len(spec))


def manifest_for(spec: bytes, kind: Kind = WORKFLOW) -> dict[str, Any]:
    """The image manifest that publishes `spec` as a plnt artifact of `kind`."""
    layer = spec_descriptor(spec, kind).to_json()
    layer["annotations"] = {TITLE_ANNOTATION: kind.filename}
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": kind.artifact_type,
        "config": config_descriptor().to_json(),
        "layers": [layer],
    }


def encode(document: dict[str, Any]) -> bytes:
    """Stable JSON bytes (the manifest digest depends on them)."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def spec_layer(manifest: bytes, *, ref: str) -> Descriptor:
    """The one plnt layer of a fetched manifest (a spec's or a dataset's), with its media
    type; `errors.ProtocolError` if it is not a plnt artifact."""
    try:
        document = json.loads(manifest)
    except ValueError as exc:
        raise errors.ProtocolError(f"{ref}: the manifest is not JSON", ref=ref) from exc
    if not isinstance(document, dict):
        raise errors.ProtocolError(f"{ref}: the manifest is not a JSON object", ref=ref)
    media_type = document.get("mediaType", MANIFEST_MEDIA_TYPE)
    if media_type == INDEX_MEDIA_TYPE or "manifests" in document:
        raise errors.ProtocolError(
            f"{ref}: is an image index, not a plnt workflow artifact", ref=ref
        )
    layers = document.get("layers")
    if not isinstance(layers, list):
        raise errors.ProtocolError(f"{ref}: the manifest has no layers", ref=ref)
    found = [
        layer
        for layer in layers
        if isinstance(layer, dict) and layer.get("mediaType") in CONTENT_MEDIA_TYPES
    ]
    if len(found) != 1:
        raise errors.ProtocolError(
            f"{ref}: expected exactly one layer of media type {WORKFLOW_MEDIA_TYPE} "
            f"(or a plnt dataset's), found {len(found)}; is this a plnt workflow artifact?",
            ref=ref,
        )
    layer = found[0]
    media_type = str(layer["mediaType"])
    size = layer.get("size")
    if not isinstance(size, int) or size < 0:
        raise errors.ProtocolError(f"{ref}: the spec layer has no valid size", ref=ref)
    try:
        digest = digests.parse(str(layer.get("digest", "")))
    except errors.InvalidDigest as exc:
        raise errors.ProtocolError(f"{ref}: the spec layer: {exc}", ref=ref) from exc
    return Descriptor(media_type, digest, size)


def signature_tag(digest: digests.Digest) -> str:
    """The tag of the signature of the artifact whose bytes hash to `digest`."""
    return f"{digests.ALGORITHM}-{digests.hex_of(digest)}.sig"


def is_signature_tag(tag: str) -> bool:
    """Whether `tag` holds a signature (`signature_tag`), not a spec or dataset."""
    return tag.startswith(f"{digests.ALGORITHM}-") and tag.endswith(".sig")


def signature_descriptor(bundle: bytes) -> Descriptor:
    """The layer descriptor of a signature bundle's bytes."""
    return Descriptor(SIGNATURE_ARTIFACT_TYPE, digests.compute(bundle), len(bundle))


def signature_manifest(bundle: bytes, subject: Descriptor) -> dict[str, Any]:
    """The manifest that attaches `bundle` to the artifact manifest `subject`."""
    layer = signature_descriptor(bundle).to_json()
    layer["annotations"] = {TITLE_ANNOTATION: SIGNATURE_FILENAME}
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": SIGNATURE_ARTIFACT_TYPE,
        "config": config_descriptor().to_json(),
        "layers": [layer],
        "subject": subject.to_json(),
    }


def signature_layer(manifest: bytes, *, ref: str) -> Descriptor:
    """The bundle layer of a fetched signature manifest; `errors.ProtocolError` if none."""
    try:
        document = json.loads(manifest)
        (layer,) = [
            layer
            for layer in document["layers"]
            if isinstance(layer, dict) and layer.get("mediaType") == SIGNATURE_ARTIFACT_TYPE
        ]
        return Descriptor(
            SIGNATURE_ARTIFACT_TYPE, digests.parse(str(layer["digest"])), int(layer["size"])
        )
    except (ValueError, KeyError, TypeError, errors.InvalidDigest) as exc:
        raise errors.ProtocolError(
            f"{ref}: the signature manifest has no single Sigstore bundle layer", ref=ref
        ) from exc
