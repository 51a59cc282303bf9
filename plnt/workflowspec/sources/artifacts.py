"""The OCI artifact that carries a workflow spec: media types and the manifest shape.

A spec is published as an OCI image manifest (the form every OCI 1.0 registry accepts) with
`artifactType` `application/vnd.plnt.workflow.v1`, the empty config descriptor, and exactly
one layer of media type `application/vnd.plnt.workflow.v1+yaml` holding the spec's bytes.
The layer digest is the spec digest. Registries and OCI layouts share this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from plnt.workflowspec import digests, errors

ARTIFACT_TYPE = "application/vnd.plnt.workflow.v1"
WORKFLOW_MEDIA_TYPE = "application/vnd.plnt.workflow.v1+yaml"
EMPTY_CONFIG_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = ", ".join((MANIFEST_MEDIA_TYPE, INDEX_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE))
TITLE_ANNOTATION = "org.opencontainers.image.title"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"
SPEC_FILENAME = "workflow.yaml"


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


def spec_descriptor(spec: bytes) -> Descriptor:
    """The layer descriptor of a spec's bytes."""
    return Descriptor(WORKFLOW_MEDIA_TYPE, digests.compute(spec), len(spec))


def manifest_for(spec: bytes) -> dict[str, Any]:
    """The image manifest that publishes `spec` as a plnt workflow artifact."""
    layer = spec_descriptor(spec).to_json()
    layer["annotations"] = {TITLE_ANNOTATION: SPEC_FILENAME}
    return {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": ARTIFACT_TYPE,
        "config": config_descriptor().to_json(),
        "layers": [layer],
    }


def encode(document: dict[str, Any]) -> bytes:
    """Stable JSON bytes (the manifest digest depends on them)."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def spec_layer(manifest: bytes, *, ref: str) -> Descriptor:
    """The spec layer of a fetched manifest; `errors.ProtocolError` if it is not a plnt one."""
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
        if isinstance(layer, dict) and layer.get("mediaType") == WORKFLOW_MEDIA_TYPE
    ]
    if len(found) != 1:
        raise errors.ProtocolError(
            f"{ref}: expected exactly one layer of media type {WORKFLOW_MEDIA_TYPE}, "
            f"found {len(found)}; is this a plnt workflow artifact?",
            ref=ref,
        )
    layer = found[0]
    size = layer.get("size")
    if not isinstance(size, int) or size < 0:
        raise errors.ProtocolError(f"{ref}: the spec layer has no valid size", ref=ref)
    try:
        digest = digests.parse(str(layer.get("digest", "")))
    except errors.InvalidDigest as exc:
        raise errors.ProtocolError(f"{ref}: the spec layer: {exc}", ref=ref) from exc
    return Descriptor(WORKFLOW_MEDIA_TYPE, digest, size)
