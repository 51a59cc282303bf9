"""References parse into one dataclass per source and render back unchanged."""

from __future__ import annotations

import pytest

from plnt.workflowspec import errors, references

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "text",
    [
        "oci://127.0.0.1:5000/team/summarize:v1",
        f"oci://registry.example.com/summarize:v1@{DIGEST}",
        f"oci://registry.example.com/summarize@{DIGEST}",
        "oci://[::1]:5000/a/b:c",
        "s3://my-bucket/specs/summarize.yaml",
        f"s3://my-bucket/specs/summarize.yaml@{DIGEST}",
        "oci-layout:/var/lib/plnt/layout:v1",
        f"oci-layout:relative/dir:v1@{DIGEST}",
        "oci-layout:/var/lib/plnt/layout",
    ],
)
def test_reference_renders_back_to_the_string_it_was_parsed_from(text: str) -> None:
    assert str(references.parse(text)) == text


def test_oci_reference_splits_host_port_repository_tag_and_digest() -> None:
    ref = references.parse(f"oci://127.0.0.1:5000/team/summarize:v1@{DIGEST}")
    assert ref == references.OciRef(
        host="127.0.0.1:5000", repository="team/summarize", tag="v1", digest=DIGEST
    )
    assert isinstance(ref, references.OciRef)
    assert ref.hostname == "127.0.0.1"


def test_layout_path_may_contain_colons_before_the_last_slash() -> None:
    ref = references.parse("oci-layout:/tmp/a:b/layout:v2")
    assert ref == references.LayoutRef(path="/tmp/a:b/layout", tag="v2")


def test_pinned_adds_the_digest_in_the_same_form() -> None:
    ref = references.parse("s3://bucket/key.yaml")
    assert str(references.pinned(ref, DIGEST)) == f"s3://bucket/key.yaml@{DIGEST}"


@pytest.mark.parametrize(
    "text",
    [
        "docker.io/library/alpine:3",
        "oci://host-only",
        "oci://host/UpperCase:v1",
        "oci://host/repo:bad tag",
        "s3://bucket",
        "s3://B/key",
        "oci-layout:",
        "oci://host/repo:v1@sha256:short",
    ],
)
def test_malformed_references_are_rejected_with_invalid_reference(text: str) -> None:
    with pytest.raises(errors.InvalidReference):
        references.parse(text)
