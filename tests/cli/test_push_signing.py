"""`plnt push --sign-key` (and `--sign-cert`) signs before it publishes and stores the
signature beside the artifact; a key that cannot sign publishes nothing (exit 2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from plnt.cli import exits, push
from plnt.workflowspec import digests, signers, sources, verifying
from tests.support.signing import Keys

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPEC_FILE = EXAMPLES / "chat.workflow.yaml"

app = typer.Typer()
push.register(app)


def test_push_with_a_key_stores_a_signature_that_verifies(tmp_path: Path) -> None:
    pair = Keys(tmp_path / "keys").key_pair("release")
    ref = f"oci-layout:{tmp_path}/layout:v1"

    result = CliRunner().invoke(app, ["push", str(SPEC_FILE), ref, "--sign-key", str(pair.private)])

    assert result.exit_code == 0, result.output
    assert "with its signature" in result.stderr
    digest = digests.compute(SPEC_FILE.read_bytes())
    bundle = asyncio.run(sources.fetch_signature(ref, digest))
    signer = signers.Signer.from_file("release", pair.public)
    verified = verifying.verify(SPEC_FILE.read_bytes(), bundle, signer=signer, digest=digest)
    assert verified.signer == signer.describe()


def test_push_with_a_certificate_embeds_it_so_the_ca_alone_verifies(tmp_path: Path) -> None:
    keys = Keys(tmp_path / "keys")
    ca = keys.ca("release-ca")
    leaf = keys.leaf(ca, "ci", email="ci@example.com")
    ref = f"oci-layout:{tmp_path}/layout:v1"

    result = CliRunner().invoke(
        app,
        [
            *("push", str(SPEC_FILE), ref),
            *("--sign-key", str(leaf.private), "--sign-cert", str(leaf.certificate)),
        ],
    )

    assert result.exit_code == 0, result.output
    digest = digests.compute(SPEC_FILE.read_bytes())
    bundle = asyncio.run(sources.fetch_signature(ref, digest))
    assert (
        bundle is not None and "x509CertificateChain" in json.loads(bundle)["verificationMaterial"]
    )
    signer = signers.Signer.from_file("release", ca.certificate, identity="ci@example.com")
    assert verifying.verify(SPEC_FILE.read_bytes(), bundle, signer=signer, digest=digest)


def test_push_with_a_key_that_cannot_sign_exits_2_and_publishes_nothing(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.key"
    bogus.write_text("not a key\n")
    layout = tmp_path / "layout"

    result = CliRunner().invoke(
        app, ["push", str(SPEC_FILE), f"oci-layout:{layout}:v1", "--sign-key", str(bogus)]
    )

    assert result.exit_code == exits.Code.USAGE, result.output
    assert "bogus.key" in result.stderr
    assert not layout.exists()


def test_a_certificate_without_its_key_exits_2_and_publishes_nothing(tmp_path: Path) -> None:
    keys = Keys(tmp_path / "keys")
    leaf = keys.leaf(keys.ca("ca"), "ci", email="ci@example.com")
    layout = tmp_path / "layout"

    result = CliRunner().invoke(
        app,
        ["push", str(SPEC_FILE), f"oci-layout:{layout}:v1", "--sign-cert", str(leaf.certificate)],
    )

    assert result.exit_code == exits.Code.USAGE, result.output
    assert "--sign-cert needs --sign-key" in result.stderr
    assert not layout.exists()
