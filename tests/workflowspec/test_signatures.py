"""Signed specs and datasets: signed on publish, stored beside the artifact, checked offline.

Real keys and a small CA made here (`tests.support.signing`), model-signing's bundles, and
the real stores: an OCI layout on disk, the Debian registry (distribution 2.8) and S3
(moto). Each refusal is the documented error, naming the digest and the signer expected.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plnt.workflowspec import (
    digests,
    errors,
    references,
    scanning,
    signers,
    signing,
    sources,
    verifying,
)
from plnt.workflowspec.sources import artifacts, oci_registry
from plnt.workflowspec.sources import s3 as s3_source
from tests.support import registry as registry_support
from tests.support import s3 as s3_support
from tests.support.signing import Keys

SPEC = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: demo}\n"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATASET = b'{"input": {"text": "hi"}, "expected": "hi"}\n'
BUCKET = "signed"


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys")


@pytest.fixture(scope="module")
def registry() -> Iterator[registry_support.Registry]:
    with registry_support.running_registry() as running:
        yield running


@pytest.fixture(scope="module")
def moto() -> Iterator[s3_support.Moto]:
    with s3_support.running_moto() as running:
        client: Any = running.client()
        client.create_bucket(Bucket=BUCKET)
        yield running


def _s3(moto: s3_support.Moto) -> sources.SourceSettings:
    return sources.SourceSettings(
        s3=sources.S3Settings(
            endpoint_url=moto.endpoint_url,
            region=s3_support.REGION,
            access_key_id=moto.access_key_id,
            secret_access_key=moto.secret_access_key,
        )
    )


def _key_signer(keys: Keys, name: str = "alice") -> tuple[Path, signers.Signer]:
    pair = keys.key_pair(name)
    return pair.private, signers.Signer.from_file(name, pair.public)


async def _publish_and_check(
    ref: str, signer_key: Path, signer: signers.Signer, config: sources.SourceSettings
) -> verifying.Verified:
    bundle = signing.sign(SPEC, key=signer_key)
    pinned = await sources.publish(SPEC, ref, config=config, signature=bundle)
    assert pinned.digest is not None
    stored = await sources.fetch_signature(pinned, pinned.digest, config=config)
    assert stored == bundle
    pulled = await sources.pull(pinned, config=config)
    return verifying.verify(pulled.data, stored, signer=signer, digest=pulled.digest)


async def test_a_signed_spec_in_an_oci_layout_verifies_and_names_its_signer(
    tmp_path: Path, keys: Keys
) -> None:
    private, signer = _key_signer(keys)

    verified = await _publish_and_check(
        f"oci-layout:{tmp_path}/layout:v1", private, signer, sources.SourceSettings()
    )

    assert verified.digest == digests.compute(SPEC)
    assert verified.signer == signer.describe()
    assert "key sha256:" in verified.signer


async def test_the_layout_signature_is_an_attached_artifact_whose_subject_is_the_spec(
    tmp_path: Path, keys: Keys
) -> None:
    private, _ = _key_signer(keys)
    await sources.publish(
        SPEC, f"oci-layout:{tmp_path}:v1", signature=signing.sign(SPEC, key=private)
    )

    index = json.loads((tmp_path / "index.json").read_text())
    by_tag = {e["annotations"][artifacts.REF_NAME_ANNOTATION]: e for e in index["manifests"]}
    signature_entry = by_tag[artifacts.signature_tag(digests.compute(SPEC))]
    assert signature_entry["artifactType"] == artifacts.SIGNATURE_ARTIFACT_TYPE
    blob = tmp_path / "blobs" / "sha256" / signature_entry["digest"].split(":")[1]
    manifest = json.loads(blob.read_bytes())
    assert manifest["subject"]["digest"] == by_tag["v1"]["digest"]
    assert manifest["layers"][0]["mediaType"] == artifacts.SIGNATURE_ARTIFACT_TYPE


async def test_a_signed_spec_in_a_registry_is_attached_to_its_manifest_and_verifies(
    registry: registry_support.Registry, keys: Keys
) -> None:
    private, signer = _key_signer(keys)
    ref = registry.ref("signed/spec", "v1")

    verified = await _publish_and_check(ref, private, signer, sources.SourceSettings())

    assert verified.signer == signer.describe()
    digest = digests.compute(SPEC)
    source = oci_registry.OciRegistrySource(sources.RegistrySettings(), sources.Limits())
    tags = await source.tags(references.parse(ref))  # type: ignore[arg-type]
    assert artifacts.signature_tag(digest) in tags


async def test_a_signed_spec_in_s3_is_a_sibling_object_and_verifies(
    moto: s3_support.Moto, keys: Keys
) -> None:
    private, signer = _key_signer(keys)

    verified = await _publish_and_check(
        f"s3://{BUCKET}/specs/demo.yaml", private, signer, _s3(moto)
    )

    assert verified.signer == signer.describe()
    client: Any = moto.client()
    sibling = s3_source.signature_key("specs/demo.yaml", digests.compute(SPEC))
    assert client.get_object(Bucket=BUCKET, Key=sibling)["ContentType"] == (
        artifacts.SIGNATURE_ARTIFACT_TYPE
    )


async def test_a_signed_dataset_is_signed_and_verified_the_same_way(
    moto: s3_support.Moto, tmp_path: Path, keys: Keys
) -> None:
    private, signer = _key_signer(keys)
    bundle = signing.sign(DATASET, key=private)
    for ref, config in (
        (f"s3://{BUCKET}/datasets/cases.jsonl", _s3(moto)),
        (f"oci-layout:{tmp_path}/datasets:v1", sources.SourceSettings()),
    ):
        pinned = await sources.publish(
            DATASET, ref, config=config, kind=artifacts.DATASET_LINES, signature=bundle
        )
        stored = await sources.fetch_signature(pinned, digests.compute(DATASET), config=config)
        verified = verifying.verify(DATASET, stored, signer=signer, digest=digests.compute(DATASET))
        assert verified.signer == signer.describe()
        with pytest.raises(errors.SignatureInvalid):
            verifying.verify(
                DATASET + b"\n", stored, signer=signer, digest=digests.compute(DATASET + b"\n")
            )


async def test_an_unsigned_artifact_has_no_signature_and_fails_as_missing(
    registry: registry_support.Registry, moto: s3_support.Moto, tmp_path: Path, keys: Keys
) -> None:
    _, signer = _key_signer(keys)
    digest = digests.compute(SPEC)
    for ref, config in (
        (registry.ref("unsigned/spec", "v1"), sources.SourceSettings()),
        (f"s3://{BUCKET}/unsigned.yaml", _s3(moto)),
        (f"oci-layout:{tmp_path}/unsigned:v1", sources.SourceSettings()),
    ):
        pinned = await sources.publish(SPEC, ref, config=config)
        assert await sources.fetch_signature(pinned, digest, config=config) is None

    with pytest.raises(errors.SignatureMissing) as caught:
        verifying.verify(SPEC, None, signer=signer, digest=digest)
    assert digest in str(caught.value)
    assert signer.describe() in str(caught.value)
    assert caught.value.expected == signer.describe()


def test_a_signature_of_other_bytes_fails_as_invalid_naming_the_digest(keys: Keys) -> None:
    private, signer = _key_signer(keys)
    tampered = SPEC.replace(b"demo", b"evil")
    bundle = signing.sign(SPEC, key=private)

    with pytest.raises(errors.SignatureInvalid) as caught:
        verifying.verify(tampered, bundle, signer=signer, digest=digests.compute(tampered))
    assert caught.value.digest == digests.compute(tampered)
    assert digests.compute(tampered) in str(caught.value)


def test_a_tampered_signature_fails_as_invalid(keys: Keys) -> None:
    private, signer = _key_signer(keys)
    bundle = json.loads(signing.sign(SPEC, key=private))
    raw = bytearray(base64.b64decode(bundle["dsseEnvelope"]["signatures"][0]["sig"]))
    raw[-1] ^= 0x01
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()

    with pytest.raises(errors.SignatureInvalid):
        verifying.verify(
            SPEC, json.dumps(bundle).encode(), signer=signer, digest=digests.compute(SPEC)
        )
    with pytest.raises(errors.SignatureInvalid):
        verifying.verify(SPEC, b"not a bundle", signer=signer, digest=digests.compute(SPEC))


def test_a_signature_by_another_key_fails_as_untrusted(keys: Keys) -> None:
    mallory, _ = _key_signer(keys, "mallory")
    _, alice = _key_signer(keys, "alice")

    with pytest.raises(errors.SignerUntrusted) as caught:
        verifying.verify(
            SPEC, signing.sign(SPEC, key=mallory), signer=alice, digest=digests.compute(SPEC)
        )
    assert alice.describe() in str(caught.value)


def test_a_certificate_from_the_trusted_ca_verifies_with_its_identity(keys: Keys) -> None:
    ca = keys.ca("release-ca")
    leaf = keys.leaf(ca, "alice", email="alice@example.com")
    signer = signers.Signer.from_file("release", ca.certificate, identity="alice@example.com")

    bundle = signing.sign(SPEC, key=leaf.private, certificate=leaf.certificate)
    verified = verifying.verify(SPEC, bundle, signer=signer, digest=digests.compute(SPEC))

    assert verified.signer == "alice@example.com (CA release)"


def test_certificates_that_are_expired_or_from_another_ca_or_identity_are_untrusted(
    keys: Keys,
) -> None:
    ca = keys.ca("release-ca")
    other_ca = keys.ca("other-ca")
    signer = signers.Signer.from_file("release", ca.certificate, identity="alice@example.com")
    cases = {
        "expired": keys.leaf(ca, "old", email="alice@example.com", expired=True),
        "other CA": keys.leaf(other_ca, "stranger", email="alice@example.com"),
        "other identity": keys.leaf(ca, "bob", email="bob@example.com"),
    }
    reasons = {}
    for case, leaf in cases.items():
        bundle = signing.sign(SPEC, key=leaf.private, certificate=leaf.certificate)
        with pytest.raises(errors.SignerUntrusted) as caught:
            verifying.verify(SPEC, bundle, signer=signer, digest=digests.compute(SPEC))
        reasons[case] = str(caught.value)

    assert "not now" in reasons["expired"]
    assert "not certified by the CA" in reasons["other CA"]
    assert "bob@example.com, not alice@example.com" in reasons["other identity"]
    assert all("alice@example.com certified by the CA" in r for r in reasons.values())


def test_a_key_that_cannot_sign_is_refused_naming_the_file(keys: Keys, tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.key"
    bogus.write_text("not a key")
    with pytest.raises(signing.SigningFailed, match=r"bogus\.key"):
        signing.sign(SPEC, key=bogus)


async def test_the_catalog_scan_names_the_trusted_signer_of_each_signed_version(
    tmp_path: Path, keys: Keys
) -> None:
    private, signer = _key_signer(keys)
    mallory, _ = _key_signer(keys, "mallory")
    layout = tmp_path / "layout"
    example = (EXAMPLES / "chat.workflow.yaml").read_bytes()
    signed, other = example + b"# v1\n", example + b"# v2\n"
    await sources.publish(
        signed, f"oci-layout:{layout}:v1", signature=signing.sign(signed, key=private)
    )
    await sources.publish(
        other, f"oci-layout:{layout}:v2", signature=signing.sign(other, key=mallory)
    )
    await sources.publish(example, f"oci-layout:{layout}:v3")

    scan = await scanning.Scanner(sources.SourceSettings(), trusted=[signer]).scan(
        f"oci-layout:{layout}"
    )

    by_tag = {found.location: found.signed_by for found in scan.found}
    assert by_tag == {"v1": signer.describe(), "v2": None, "v3": None}
