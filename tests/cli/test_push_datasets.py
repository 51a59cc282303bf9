"""`plnt push` publishes evaluation datasets as it publishes specs, and the quality gate
reads back exactly the cases that were pushed.

Each form (a YAML list, a `{cases: [...]}` mapping, a JSON list, JSON Lines) is pushed
through typer's CliRunner to an OCI layout and to a real registry (docker-registry), then
pulled by ref and digest with the gate's own code (`evaluating.load_cases` through the
worker's `SpecCache`). Invalid datasets are refused before anything is written.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from plnt.api import evaluations as ev
from plnt.cli import exits, push
from plnt.sagas.gating import evaluating
from plnt.sagas.speccache import SpecCache
from plnt.workflowspec import digests, errors, references, sources
from plnt.workflowspec.sources import artifacts
from plnt.workflowspec.sources.oci_registry import OciRegistrySource
from tests.support import registry as support

SPEC_FILE = Path(__file__).resolve().parents[2] / "examples" / "chat.workflow.yaml"
CASES: list[dict[str, Any]] = [
    {"name": "greets", "inputs": {"who": "ada"}, "expect": [{"contains": "ada"}]},
    {"name": "counts", "inputs": {"n": 3}, "expect": [{"regex": r"^\d+$", "name": "digits"}]},
    {"name": "shaped", "expect": [{"path": "/a", "equals": None}]},
]
FORMS = {
    "evals.yaml": yaml.safe_dump(CASES),
    "cases.yaml": yaml.safe_dump({"cases": CASES}),
    "evals.json": json.dumps(CASES, indent=2),
    "evals.jsonl": "".join(json.dumps(case) + "\n" for case in CASES),
}

app = typer.Typer()
push.register(app)


@pytest.fixture(scope="module")
def registry() -> Iterator[support.Registry]:
    with support.running_registry() as running:
        yield running


def written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def gate_reads(pinned: str, tmp_path: Path) -> list[ev.EvaluationCase]:
    """What the quality gate reads from `ref` + `digest`, as a WorkflowRun would pin it."""
    ref, digest = pinned.rsplit("@", 1)
    evaluation = ev.CanaryEvaluation(dataset=ev.EvaluationDataset(ref=ref, digest=digest))
    return asyncio.run(evaluating.load_cases(evaluation, SpecCache(tmp_path / "cache")))


@pytest.mark.parametrize("name", FORMS)
def test_each_dataset_form_pushed_to_a_layout_is_read_back_by_the_gate_case_for_case(
    tmp_path: Path, name: str
) -> None:
    file = written(tmp_path, name, FORMS[name])
    ref = f"oci-layout:{tmp_path}/layout:evals"

    result = CliRunner().invoke(app, ["push", str(file), ref])

    assert result.exit_code == 0, result.output
    pinned = result.stdout.strip().splitlines()[-1]
    assert pinned == f"{ref}@{digests.compute(file.read_bytes())}"
    assert "pushed evaluation dataset" in result.stderr
    assert gate_reads(pinned, tmp_path) == [ev.EvaluationCase.model_validate(c) for c in CASES]


@pytest.mark.parametrize("name", FORMS)
def test_each_dataset_form_pushed_to_a_registry_is_read_back_by_the_gate_case_for_case(
    tmp_path: Path, registry: support.Registry, name: str
) -> None:
    file = written(tmp_path, name, FORMS[name])
    ref = registry.ref("team/evals", name.replace(".", "-"))

    result = CliRunner().invoke(app, ["push", str(file), ref])

    assert result.exit_code == 0, result.output
    pinned = result.stdout.strip().splitlines()[-1]
    assert pinned == f"{ref}@{digests.compute(file.read_bytes())}"
    assert gate_reads(pinned, tmp_path) == [ev.EvaluationCase.model_validate(c) for c in CASES]
    layer = asyncio.run(
        OciRegistrySource(sources.RegistrySettings(), sources.Limits()).resolve(
            references.OciRef(
                host=registry.host, repository="team/evals", tag=name.replace(".", "-")
            )
        )
    )
    lines = name.endswith(".jsonl")
    expected = artifacts.DATASET_LINES_MEDIA_TYPE if lines else artifacts.DATASET_MEDIA_TYPE
    assert layer.media_type == expected


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("evals.yaml", yaml.safe_dump([CASES[0], {"inputs": {}}]), "cases[1].name: Field required"),
        (
            "evals.yaml",
            yaml.safe_dump({"cases": [{"name": "x", "expect": [{"contains": "a", "regex": "b"}]}]}),
            "cases[0].expect[0]: Invalid value: give exactly one of",
        ),
        ("evals.jsonl", '{"name": "a"}\n\n{"name": "b"\n', "line 3: not JSON: Expecting ','"),
        ("evals.jsonl", '{"name": "a"}\n{"name": "a b"}\n', "line 2: cases[1].name: String should"),
    ],
)
def test_an_invalid_dataset_is_refused_naming_case_line_and_field_and_nothing_is_written(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    file = written(tmp_path, name, text)

    result = CliRunner().invoke(app, ["push", str(file), f"oci-layout:{tmp_path}/layout:evals"])

    assert result.exit_code == exits.Code.INVALID == 6
    assert result.stderr.startswith(f"error: {file}: invalid evaluation dataset: ")
    assert says in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "layout").exists()


def test_an_invalid_dataset_is_not_pushed_to_a_registry(
    tmp_path: Path, registry: support.Registry
) -> None:
    file = written(tmp_path, "evals.yaml", yaml.safe_dump([{"inputs": {}}]))
    ref = registry.ref("team/refused")

    result = CliRunner().invoke(app, ["push", str(file), ref])

    assert result.exit_code == exits.Code.INVALID
    with pytest.raises(errors.NotFound):
        asyncio.run(sources.pull(ref))


def test_kind_spec_reads_a_dataset_as_a_workflow_spec_and_says_so(tmp_path: Path) -> None:
    file = written(tmp_path, "evals.yaml", FORMS["evals.yaml"])

    result = CliRunner().invoke(
        app, ["push", str(file), f"oci-layout:{tmp_path}/layout:v1", "--kind", "spec"]
    )

    assert result.exit_code == exits.Code.INVALID
    assert result.stderr.startswith(f"error: {file}: invalid workflow spec")
    assert "<document>: must be a mapping" in result.stderr
    assert not (tmp_path / "layout").exists()


def test_kind_dataset_reads_a_spec_as_a_dataset_and_names_what_it_found(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["push", str(SPEC_FILE), f"oci-layout:{tmp_path}/layout:v1", "--kind", "dataset"]
    )

    assert result.exit_code == exits.Code.INVALID
    assert result.stderr.startswith(f"error: {SPEC_FILE}: invalid evaluation dataset: ")
    assert "found a mapping without cases (keys: apiVersion, " in result.stderr


def test_a_spec_still_pushes_as_a_workflow_artifact(tmp_path: Path) -> None:
    ref = f"oci-layout:{tmp_path}:v1"

    result = CliRunner().invoke(app, ["push", str(SPEC_FILE), ref])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == (
        f"{ref}@{digests.compute(SPEC_FILE.read_bytes())}"
    )
    assert "pushed workflow spec" in result.stderr
    (entry,) = json.loads((tmp_path / "index.json").read_text())["manifests"]
    assert entry["artifactType"] == artifacts.ARTIFACT_TYPE


def test_pull_fetches_a_pushed_dataset_byte_for_byte(tmp_path: Path) -> None:
    file = written(tmp_path, "evals.jsonl", FORMS["evals.jsonl"])
    runner = CliRunner()
    pinned = runner.invoke(app, ["push", str(file), f"oci-layout:{tmp_path}/layout:evals"])
    out = tmp_path / "pulled.jsonl"

    pulled = runner.invoke(app, ["pull", pinned.stdout.strip().splitlines()[-1], "-o", str(out)])

    assert pulled.exit_code == 0, pulled.output
    assert out.read_bytes() == file.read_bytes()
