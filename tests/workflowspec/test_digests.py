"""Digests are sha256 of the exact bytes, validated strictly, and mismatches name both sides."""

from __future__ import annotations

import hashlib

import pytest

from plnt.workflowspec import digests, errors


def test_digest_is_sha256_of_the_exact_bytes() -> None:
    data = b"apiVersion: microagents.plnt.work/v1\n"
    assert digests.compute(data) == f"sha256:{hashlib.sha256(data).hexdigest()}"


def test_digest_changes_when_only_whitespace_changes() -> None:
    assert digests.compute(b"a: 1\n") != digests.compute(b"a:  1\n")


@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "A" * 64,
        "sha256:" + "a" * 63,
        "sha512:" + "a" * 64,
        "a" * 64,
        "sha256:" + "g" * 64,
        "",
    ],
)
def test_malformed_digest_strings_are_rejected_with_invalid_digest(value: str) -> None:
    assert not digests.is_valid(value)
    with pytest.raises(errors.InvalidDigest, match="invalid digest"):
        digests.parse(value)


def test_verify_returns_the_digest_when_the_bytes_match() -> None:
    data = b"x"
    assert digests.verify(data, digests.compute(data)) == digests.compute(data)


def test_verify_raises_digest_mismatch_naming_expected_and_actual() -> None:
    expected = digests.compute(b"published")
    actual = digests.compute(b"tampered")
    with pytest.raises(errors.DigestMismatch) as caught:
        digests.verify(b"tampered", expected, ref="oci://h/r:t")
    assert caught.value.expected == expected
    assert caught.value.actual == actual
    assert expected in str(caught.value)
    assert actual in str(caught.value)
    assert "oci://h/r:t" in str(caught.value)
