"""The OCI image layout source: the embedded default registry, a directory on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plnt.workflowspec import digests, errors, references, sources
from plnt.workflowspec.sources import artifacts

SPEC = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\n"


async def test_publish_then_pull_by_tag_returns_the_bytes_and_their_digest(tmp_path: Path) -> None:
    pinned = await sources.publish(SPEC, f"oci-layout:{tmp_path}/layout:v1")
    assert str(pinned) == f"oci-layout:{tmp_path}/layout:v1@{digests.compute(SPEC)}"

    pulled = await sources.pull(f"oci-layout:{tmp_path}/layout:v1")

    assert pulled.data == SPEC
    assert pulled.digest == digests.compute(SPEC)
    assert pulled.ref == pinned


async def test_pull_by_digest_alone_needs_no_tag(tmp_path: Path) -> None:
    await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    pulled = await sources.pull(f"oci-layout:{tmp_path}@{digests.compute(SPEC)}")
    assert pulled.data == SPEC


async def test_layout_on_disk_follows_the_oci_image_layout_spec(tmp_path: Path) -> None:
    await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")

    assert json.loads((tmp_path / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((tmp_path / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["annotations"] == {"org.opencontainers.image.ref.name": "v1"}
    assert entry["artifactType"] == artifacts.ARTIFACT_TYPE
    manifest_blob = tmp_path / "blobs" / "sha256" / entry["digest"].split(":")[1]
    manifest = json.loads(manifest_blob.read_bytes())
    assert manifest["artifactType"] == artifacts.ARTIFACT_TYPE
    assert manifest["layers"][0]["mediaType"] == artifacts.WORKFLOW_MEDIA_TYPE
    assert manifest["layers"][0]["digest"] == digests.compute(SPEC)


async def test_publishing_a_tag_again_moves_it_and_keeps_other_tags(tmp_path: Path) -> None:
    await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    await sources.publish(SPEC + b"# v2\n", f"oci-layout:{tmp_path}:v2")
    await sources.publish(SPEC + b"# v1 again\n", f"oci-layout:{tmp_path}:v1")

    assert (await sources.pull(f"oci-layout:{tmp_path}:v1")).data == SPEC + b"# v1 again\n"
    assert (await sources.pull(f"oci-layout:{tmp_path}:v2")).data == SPEC + b"# v2\n"
    assert len(json.loads((tmp_path / "index.json").read_text())["manifests"]) == 2


async def test_tampered_blob_is_refused_with_digest_mismatch_naming_both(tmp_path: Path) -> None:
    pinned = await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    expected = digests.compute(SPEC)
    (tmp_path / "blobs" / "sha256" / digests.hex_of(expected)).write_bytes(b"kind: Evil\n")

    with pytest.raises(errors.DigestMismatch) as caught:
        await sources.pull(pinned)

    assert caught.value.expected == expected
    assert caught.value.actual == digests.compute(b"kind: Evil\n")
    assert expected in str(caught.value) and caught.value.actual in str(caught.value)


async def test_pull_with_a_digest_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    pinned = await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    with pytest.raises(errors.InvalidReference, match="pinned to"):
        await sources.pull(pinned, digest=digests.compute(b"other"))


async def test_unknown_tag_is_not_found(tmp_path: Path) -> None:
    await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    with pytest.raises(errors.NotFound, match="'v9'"):
        await sources.pull(f"oci-layout:{tmp_path}:v9")


async def test_a_directory_that_is_not_a_layout_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(errors.NotFound, match="not an OCI image layout"):
        await sources.pull(f"oci-layout:{tmp_path}:v1")


async def test_spec_over_the_size_limit_is_refused_on_publish(tmp_path: Path) -> None:
    config = sources.SourceSettings(limits=sources.Limits(max_bytes=16))
    with pytest.raises(errors.TooLarge) as caught:
        await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1", config=config)
    assert caught.value.limit == 16
    assert not (tmp_path / "index.json").exists()


async def test_spec_over_the_size_limit_is_refused_on_pull(tmp_path: Path) -> None:
    pinned = await sources.publish(SPEC, f"oci-layout:{tmp_path}:v1")
    config = sources.SourceSettings(limits=sources.Limits(max_bytes=16))
    for ref in (references.unpinned(pinned), pinned):
        with pytest.raises(errors.TooLarge, match="limit of 16 bytes"):
            await sources.pull(ref, config=config)
