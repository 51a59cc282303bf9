"""Whom a verifier trusts: the policy's signers, the namespaces it binds, and which signer a
run's `verify` requires at the pull (or why none can be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.workflowspec import errors, signers
from tests.support.signing import Keys

DIGEST = "sha256:" + "b" * 64


@pytest.fixture
def policy(tmp_path: Path) -> signers.SignaturePolicy:
    keys = Keys(tmp_path)
    pair, ca = keys.key_pair("release"), keys.ca("ci-ca")
    return signers.SignaturePolicy.from_files(
        [f"release={pair.public}", f"ci={ca.certificate}"],
        required_in=["prod"],
        identities={"ci": "ci@example.com"},
    )


def test_a_policy_reads_keys_and_cas_and_binds_only_its_namespaces(
    policy: signers.SignaturePolicy,
) -> None:
    assert policy.signers["release"].public_key is not None
    assert policy.signers["ci"].identity == "ci@example.com"
    assert policy.binds("prod") and not policy.binds("dev")
    assert signers.SignaturePolicy(required_in=frozenset({"*"})).binds("anything")


@pytest.mark.parametrize(
    ("entries", "identities", "message"),
    [
        (["release"], {}, "expected NAME=PATH"),
        (["release=/no/such.pem"], {}, "cannot read /no/such.pem"),
        (["ci={ca}"], {}, "a CA needs the identity"),
        (["junk={junk}"], {}, "neither a PEM public key nor PEM certificates"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(
    tmp_path: Path, entries: list[str], identities: dict[str, str], message: str
) -> None:
    ca = Keys(tmp_path).ca("ci-ca").certificate
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(ValueError, match=message):
        signers.SignaturePolicy.from_files(
            [e.format(ca=ca, junk=junk) for e in entries], identities=identities
        )


def test_signatures_required_without_any_trusted_signer_is_refused() -> None:
    with pytest.raises(ValueError, match="no trusted signer"):
        signers.SignaturePolicy.from_files([], required_in=["*"])


def test_the_signer_a_pull_requires(policy: signers.SignaturePolicy, tmp_path: Path) -> None:
    def required(verify: dict[str, object] | None, namespace: str) -> signers.Signer | None:
        return signers.required(verify, namespace=namespace, policy=policy, digest=DIGEST)

    assert required(None, "dev") is None
    assert required({"signer": "release"}, "prod") is policy.signers["release"]
    assert required({"signer": "release"}, "dev") is policy.signers["release"]
    own = Keys(tmp_path / "own").key_pair("own").public
    assert required({"publicKey": {"file": str(own)}}, "dev") is not None
    for verify, namespace, why in (
        (None, "prod", "names no trusted signer"),
        ({"signer": "mallory"}, "dev", "not a signer this worker trusts"),
        ({"publicKey": {"file": str(own)}}, "prod", "only the worker's trusted signers"),
        ({"publicKey": {"file": "/no/such.pub"}}, "dev", "cannot read"),
    ):
        with pytest.raises(errors.SignerUntrusted, match=why) as raised:
            required(verify, namespace)
        assert DIGEST in str(raised.value)
