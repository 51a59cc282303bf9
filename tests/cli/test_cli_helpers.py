"""The CLI's helpers that are not commands: manifests, spec files, store options, reports."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from plnt.cli import manifests, reports, spec_files
from plnt.cli.store_options import StoreOptions
from plnt.workflowspec import errors


def test_a_manifest_with_another_kind_is_refused_naming_the_document(tmp_path: Path) -> None:
    text = "kind: WorkflowRun\nmetadata: {name: a}\n---\nkind: ConfigMap\n"
    with pytest.raises(manifests.ManifestError, match="document 2 is a ConfigMap"):
        manifests.workflowruns(tmp_path / "m.yaml", text, namespace=None)


def test_a_manifest_declaring_another_namespace_than_the_flag_is_refused(tmp_path: Path) -> None:
    text = "kind: WorkflowRun\nmetadata: {name: a, namespace: team-b}\n"
    with pytest.raises(manifests.ManifestError, match='"team-b" does not match'):
        manifests.workflowruns(tmp_path / "m.yaml", text, namespace="team-a")
    loaded = manifests.workflowruns(tmp_path / "m.yaml", text, namespace="team-b")
    assert [d["metadata"]["name"] for d in loaded] == ["a"]


@pytest.mark.parametrize(
    ("text", "problem"), [("", "no objects found"), ("a: [", "not valid YAML")]
)
def test_an_empty_or_broken_manifest_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(manifests.ManifestError, match=problem):
        manifests.workflowruns(tmp_path / "m.yaml", text, namespace=None)


def test_a_spec_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_bytes(b"x" * 65)
    with pytest.raises(errors.TooLarge) as refused:
        spec_files.read_bounded(spec, limit=64)
    assert (refused.value.limit, refused.value.size) == (64, 65)
    assert spec_files.read_bounded(spec, limit=65) == b"x" * 65


def test_store_options_build_the_settings_with_a_ca_file_winning_over_insecure() -> None:
    options = StoreOptions(
        username="bob", password="pw", ca_file=Path("/ca.pem"), insecure_skip_tls_verify=True
    )
    settings = options.settings()
    assert settings.registry.tls_verify == "/ca.pem"
    assert (settings.registry.username, settings.registry.password) == ("bob", "pw")
    insecure = dataclasses.replace(options, ca_file=None).settings()
    assert insecure.registry.tls_verify is False
    assert "pw" not in repr(options)


def test_store_options_default_to_the_sources_own_limits() -> None:
    settings = StoreOptions().settings()
    assert settings.limits.max_bytes == 1024 * 1024
    assert settings.registry.tls_verify is True


def test_history_of_a_run_with_nothing_promoted_is_no_report() -> None:
    assert reports.history_text({"status": {"revision": None}}) is None
    promoted = {"status": {"revision": 1, "history": [{"revision": 1, "digest": "sha256:ab"}]}}
    assert reports.history_text(promoted) is not None
    assert reports.history_text(promoted).splitlines()[1].startswith("1*")  # type: ignore[union-attr]


EVALUATION = {
    "revision": 2,
    "stableRevision": 1,
    "passed": False,
    "message": "evaluation failed: next pass rate 0.00 < min 1.00; stable 1.00 (0/1)",
    "scorers": [
        {
            "name": "next",
            "type": "regex",
            "checks": 1,
            "canaryPassRate": 0.0,
            "stablePassRate": 1.0,
            "regression": 1.0,
            "minPassRate": 1.0,
            "maxRegression": 0.0,
            "passed": False,
            "message": "…",
        }
    ],
    "cases": [
        {
            "name": "after-4",
            "canary": {"output": " the", "scores": [{"scorer": "next", "passed": False}]},
            "stable": {"output": " 5, 6", "scores": [{"scorer": "next", "passed": True}]},
        }
    ],
}


def test_status_states_the_last_evaluations_numbers_and_answers_side_by_side() -> None:
    run = {"metadata": {"name": "r"}, "spec": {}, "status": {"lastEvaluation": EVALUATION}}
    text = reports.status_text(run, [])
    assert "Evaluation:  revision 2 beside stable 1: failed" in text
    scorer = next(line for line in text.splitlines() if line.strip().startswith("next"))
    assert scorer.split()[:5] == ["next", "regex", "1", "0.00", "1.00"]
    assert "min 1.00, regression 1.00 <= 0.00" in scorer and scorer.endswith("FAIL")
    case = next(line for line in text.splitlines() if "after-4" in line)
    assert "✗ ' the'" in case and "✓ ' 5, 6'" in case
    assert text.index("Evaluation:") < text.index("Events:")


def test_status_without_an_evaluation_says_nothing_of_one() -> None:
    run = {"metadata": {"name": "r"}, "spec": {}, "status": {}}
    assert "Evaluation" not in reports.status_text(run, [])
