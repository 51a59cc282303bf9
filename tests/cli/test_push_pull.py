"""`plnt push FILE REF` validates, publishes, and prints the pinned reference last;
`plnt pull` fetches it back; both exit with the codes of `plnt.cli.exits`.

The commands run through typer's CliRunner against a real registry (docker-registry) and an OCI
layout directory; `plnt pull` reads back what was pushed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plnt.cli import exits, push
from plnt.workflowspec import digests
from tests.support import registry as support

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPEC_FILE = EXAMPLES / "chat.workflow.yaml"

# The commands as `plnt` registers them, without importing every other command module.
app = typer.Typer()
push.register(app)


@pytest.fixture(scope="module")
def auth_registry() -> Iterator[support.Registry]:
    with support.running_registry(username="bob", password="pw") as running:
        yield running


def test_push_prints_the_pinned_reference_as_its_last_line(tmp_path: Path) -> None:
    ref = f"oci-layout:{tmp_path}/layout:v1"

    result = CliRunner().invoke(app, ["push", str(SPEC_FILE), ref])

    assert result.exit_code == 0, result.output
    expected = f"{ref}@{digests.compute(SPEC_FILE.read_bytes())}"
    assert result.stdout.strip().splitlines()[-1] == expected


def test_pushed_spec_pulls_back_byte_for_byte(tmp_path: Path) -> None:
    runner = CliRunner()
    pushed = runner.invoke(app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}:v1"])
    pinned = pushed.stdout.strip().splitlines()[-1]
    out = tmp_path / "pulled.yaml"

    pulled = runner.invoke(app, ["pull", pinned, "-o", str(out)])

    assert pulled.exit_code == 0, pulled.output
    assert out.read_bytes() == SPEC_FILE.read_bytes()
    assert pinned in pulled.stderr


def test_push_to_a_registry_with_credentials_from_the_environment(
    auth_registry: support.Registry,
) -> None:
    ref = auth_registry.ref("team/chat")
    env = {"PLNT_REGISTRY_USERNAME": "bob", "PLNT_REGISTRY_PASSWORD": "pw"}

    result = CliRunner().invoke(app, ["push", str(SPEC_FILE), ref], env=env)

    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == (
        f"{ref}@{digests.compute(SPEC_FILE.read_bytes())}"
    )


def test_push_with_a_wrong_password_exits_5_as_denied_with_a_clear_error(
    auth_registry: support.Registry,
) -> None:
    result = CliRunner().invoke(
        app,
        ["push", str(SPEC_FILE), auth_registry.ref("team/chat"), "--username", "bob"],
        env={"PLNT_REGISTRY_PASSWORD": "nope"},
    )

    assert result.exit_code == exits.Code.DENIED == 5
    assert "rejected the credentials" in result.stderr
    assert result.stdout == ""


def test_push_refuses_an_invalid_spec_before_publishing_and_exits_6(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: microagents.plnt.work/v1\nkind: Workflow\n")

    result = CliRunner().invoke(app, ["push", str(bad), f"oci-layout:{tmp_path}/layout:v1"])

    assert result.exit_code == exits.Code.INVALID == 6
    assert result.stderr.startswith(f"error: {bad}: ")
    assert "invalid workflow spec" in result.stderr
    assert not (tmp_path / "layout").exists()


def test_push_refuses_a_file_over_the_size_limit_and_exits_7(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}:v1", "--max-bytes", "64"]
    )
    assert result.exit_code == exits.Code.TOO_LARGE == 7
    assert "exceeds the limit of 64 bytes" in result.stderr


def test_push_to_a_reference_that_already_carries_a_digest_is_a_usage_error(tmp_path: Path) -> None:
    digest = digests.compute(b"x")
    result = CliRunner().invoke(app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}:v1@{digest}"])
    assert result.exit_code == exits.Code.USAGE == 2
    assert "digest is computed from the bytes" in result.stderr


def test_pull_of_bytes_that_do_not_match_the_digest_exits_9(tmp_path: Path) -> None:
    runner = CliRunner()
    runner.invoke(app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}:v1"])
    blob = tmp_path / "blobs" / "sha256" / digests.hex_of(digests.compute(SPEC_FILE.read_bytes()))
    blob.write_bytes(b"tampered")

    result = runner.invoke(app, ["pull", f"oci-layout:{tmp_path}:v1"])

    assert result.exit_code == exits.Code.DIGEST_MISMATCH == 9
    assert "digest mismatch" in result.stderr


def test_pull_of_a_tag_that_is_not_there_exits_3_as_not_found(tmp_path: Path) -> None:
    CliRunner().invoke(app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}:v1"])

    result = CliRunner().invoke(app, ["pull", f"oci-layout:{tmp_path}:v2"])

    assert result.exit_code == exits.Code.NOT_FOUND == 3
    assert result.stderr.startswith("error: ")
    assert result.stdout == ""


def test_push_of_a_file_that_does_not_exist_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"

    result = CliRunner().invoke(app, ["push", str(missing), f"oci-layout:{tmp_path}:v1"])

    assert result.exit_code == exits.Code.USAGE
    assert result.stderr == f"error: {missing}: No such file or directory\n"


def test_push_and_pull_offer_the_same_store_options() -> None:
    def options(command: str) -> set[str]:
        help_text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
        return {word for word in help_text.split() if word.startswith("--")} - {"--help"}

    shared = {"--username", "--password", "--ca-file", "--max-bytes", "--timeout", "--s3-region"}
    assert shared <= options("push")
    push_only = {"--kind", "--sign-key", "--sign-cert"}
    assert options("push") - push_only == options("pull") - {"--output", "--digest"}
