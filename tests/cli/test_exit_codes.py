"""One exit-code table: each error of the layers below maps to its documented code, once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from plnt.cli import exits, invoking, manifests, spec_files
from plnt.client import errors as client_errors
from plnt.workflowspec import dag, documents
from plnt.workflowspec import errors as source_errors

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
Code = exits.Code


def api_error(kind: type[client_errors.ApiError], code: int) -> client_errors.ApiError:
    return kind("the server said no", code=code, reason=kind.__name__)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (api_error(client_errors.NotFound, 404), Code.NOT_FOUND),
        (api_error(client_errors.Conflict, 409), Code.CONFLICT),
        (api_error(client_errors.AlreadyExists, 409), Code.CONFLICT),
        (api_error(client_errors.Unauthorized, 401), Code.DENIED),
        (api_error(client_errors.Forbidden, 403), Code.DENIED),
        (api_error(client_errors.Invalid, 422), Code.INVALID),
        (api_error(client_errors.ServerError, 503), Code.FAILED),
        (api_error(client_errors.BadRequest, 400), Code.FAILED),
        (api_error(client_errors.Gone, 410), Code.FAILED),
        (client_errors.TransportError("connection refused"), Code.UNAVAILABLE),
        (client_errors.KubeconfigError("no server"), Code.FAILED),
    ],
)
def test_each_client_error_exits_with_its_code(error: Exception, expected: Code) -> None:
    assert exits.code_of(error) is expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (source_errors.InvalidReference("nope://x"), Code.USAGE),
        (source_errors.InvalidDigest("sha256:xyz"), Code.USAGE),
        (source_errors.NotFound("no tag v2"), Code.NOT_FOUND),
        (source_errors.AuthenticationFailed("rejected"), Code.DENIED),
        (source_errors.TooLarge("big", limit=1), Code.TOO_LARGE),
        (source_errors.Unavailable("down", attempts=3), Code.UNAVAILABLE),
        (
            source_errors.DigestMismatch(expected="sha256:a", actual="sha256:b"),
            Code.DIGEST_MISMATCH,
        ),
        (source_errors.ProtocolError("not an artifact"), Code.FAILED),
    ],
)
def test_each_spec_source_error_exits_with_its_code(error: Exception, expected: Code) -> None:
    assert exits.code_of(error) is expected


def test_a_workflow_spec_that_fails_validation_exits_as_invalid_like_a_422() -> None:
    error = documents.SpecError([dag.Problem("steps", "must not be empty")])
    assert exits.code_of(error) is Code.INVALID
    assert exits.code_of(api_error(client_errors.Invalid, 422)) is Code.INVALID


@pytest.mark.parametrize(
    "error",
    [
        manifests.ManifestError("run.yaml: no objects found"),
        invoking.InputError("--input 'x' is not key=value"),
        spec_files.UnreadableSpec("No such file or directory"),
    ],
)
def test_what_the_user_passed_wrong_is_a_usage_error(error: Exception) -> None:
    assert exits.code_of(error) is Code.USAGE


def test_the_same_meaning_has_the_same_code_whichever_layer_reports_it() -> None:
    assert exits.code_of(api_error(client_errors.NotFound, 404)) == exits.code_of(
        source_errors.NotFound("no key")
    )
    assert exits.code_of(api_error(client_errors.Forbidden, 403)) == exits.code_of(
        source_errors.AuthenticationFailed("refused")
    )
    assert exits.code_of(client_errors.TransportError("refused")) == exits.code_of(
        source_errors.Unavailable("refused")
    )


def test_an_unexpected_error_is_not_swallowed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError, match="bug"), exits.reported():
        raise RuntimeError("bug")
    assert capsys.readouterr().err == ""


def test_an_api_error_prints_the_servers_message_and_exits_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = client_errors.NotFound('workflowruns.plnt.work "x" not found', code=404)
    with pytest.raises(typer.Exit) as exited, exits.reported(prefix="get: "):
        raise error
    assert exited.value.exit_code == Code.NOT_FOUND
    assert capsys.readouterr().err == 'error: get: workflowruns.plnt.work "x" not found\n'


def test_ctrl_c_exits_130_saying_interrupted(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exited, exits.reported():
        raise KeyboardInterrupt
    assert exited.value.exit_code == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_docs_cli_md_prints_the_same_table_as_the_code() -> None:
    section = DOCS.read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", section, flags=re.MULTILINE)
    assert [(int(code), name) for code, name in rows] == [(c.value, c.name) for c in Code]
