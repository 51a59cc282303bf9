"""Evaluation datasets: the one reader `plnt push` and the quality gate share, its three
forms, the problems it names (case index, line and field), how push tells a dataset from
a spec, and the artifact a dataset is published as (real OCI layouts on disk).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from plnt.api import evaluations as ev
from plnt.sagas.gating import evaluating
from plnt.workflowspec import datasets, documents, sources
from plnt.workflowspec.sources import artifacts

CASES: list[dict[str, Any]] = [
    {"name": "greets", "inputs": {"who": "ada"}, "expect": [{"contains": "ada"}]},
    {"name": "counts", "inputs": {"n": 3}, "expect": [{"regex": r"^\d+$", "name": "digits"}]},
    {
        "name": "shaped",
        "expect": [{"path": "/a", "equals": None}, {"jsonSchema": {"type": "object"}}],
    },
]
SPEC = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: demo}\nsteps: []\n"


def lines(cases: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(case) + "\n" for case in cases).encode()


FORMS = {
    "a YAML list": (yaml.safe_dump(CASES).encode(), False),
    "a cases mapping": (yaml.safe_dump({"cases": CASES}).encode(), False),
    "a JSON list": (json.dumps(CASES, indent=2).encode(), False),
    "JSON Lines": (lines(CASES), True),
    "one JSON line": (lines(CASES[:1]), True),
}


@pytest.mark.parametrize("form", FORMS)
def test_every_form_reads_as_the_same_cases(form: str) -> None:
    data, is_lines = FORMS[form]

    read = datasets.read(data)

    expected = [ev.EvaluationCase.model_validate(case) for case in CASES]
    assert read.cases == expected[: len(read.cases)]
    assert read.lines is is_lines
    assert read.artifact is (artifacts.DATASET_LINES if is_lines else artifacts.DATASET)


def test_the_quality_gate_reads_datasets_with_this_very_reader() -> None:
    assert evaluating.parse_dataset is datasets.parse_dataset
    assert evaluating.InvalidDataset is datasets.InvalidDataset


def test_an_invalid_dataset_is_a_workflow_spec_error_so_push_exits_as_invalid() -> None:
    assert issubclass(datasets.InvalidDataset, documents.WorkflowSpecError)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            yaml.safe_dump([CASES[0], {"inputs": {}}]).encode(),
            "cases[1].name: Field required",
        ),
        (
            yaml.safe_dump(
                {"cases": [CASES[0], {"name": "x", "expect": [{"regex": "("}]}]}
            ).encode(),
            "cases[1].expect[0].regex: Invalid value:",
        ),
        (b'{"name": "a"}\n\n{"name": "b",\n', "line 3: not JSON: Expecting property name"),
        (b'{"name": "a"}\n\n{"inputs": {}}\n', "line 3: cases[1].name: Field required"),
        (b"{not json\n[", "neither YAML, JSON nor JSON Lines: line 1:"),
        (b"cases: [{name: a}]\nmetadata: {}\n", "holds only cases; found also: metadata"),
        (b"cases: {name: a}\n", "cases: expected a list of cases"),
        (b"[]", "expected a non-empty list of cases"),
        (b"# nothing\n", "expected a non-empty list of cases"),
        (SPEC, "found a mapping without cases (keys: apiVersion, kind, metadata, steps)"),
        (b"just words\n", "found a single str ('just words')"),
        (
            yaml.safe_dump([CASES[0], CASES[1], CASES[0]]).encode(),
            'cases[2].name: duplicate case name "greets" (also cases[0])',
        ),
    ],
)
def test_an_invalid_dataset_is_refused_naming_where_and_why(data: bytes, message: str) -> None:
    with pytest.raises(datasets.InvalidDataset) as raised:
        datasets.read(data)
    assert message in str(raised.value)


def test_a_dataset_over_the_case_limit_is_refused() -> None:
    many = [{"name": f"c{n}"} for n in range(ev.MAX_CASES + 1)]
    with pytest.raises(datasets.InvalidDataset, match=f"{ev.MAX_CASES + 1} cases, more than"):
        datasets.read(lines(many))


def test_a_systematic_mistake_is_named_a_bounded_number_of_times() -> None:
    nameless = [{"inputs": {"n": n}} for n in range(30)]
    with pytest.raises(datasets.InvalidDataset) as raised:
        datasets.read(yaml.safe_dump(nameless).encode())
    message = str(raised.value)
    assert message.count("Field required") == datasets.MAX_PROBLEMS
    assert message.endswith("; and 20 more")


@pytest.mark.parametrize(
    ("data", "name", "dataset"),
    [
        (FORMS["a YAML list"][0], "evals.yaml", True),
        (FORMS["a cases mapping"][0], "evals.yaml", True),
        (FORMS["JSON Lines"][0], "evals.json", True),
        (FORMS["one JSON line"][0], "evals.jsonl", True),
        (b"anything at all", "evals.NDJSON", True),
        (b"- not even a case\n", "evals.yaml", True),
        (SPEC, "spec.yaml", False),
        (SPEC + b"cases: []\n", "spec.yaml", False),
        (b"kind: Workflow\n", "spec.yaml", False),
        (b"just words\n", "notes.yaml", False),
        (b"steps: [\n", "broken.yaml", False),
    ],
)
def test_push_takes_lists_cases_mappings_and_json_lines_for_datasets(
    data: bytes, name: str, dataset: bool
) -> None:
    assert datasets.is_dataset(data, name=name) is dataset


@pytest.mark.parametrize(
    ("data", "kind"),
    [(FORMS["a YAML list"][0], artifacts.DATASET), (lines(CASES), artifacts.DATASET_LINES)],
)
async def test_a_dataset_is_published_as_a_dataset_artifact_and_pulled_back_by_tag(
    tmp_path: Path, data: bytes, kind: artifacts.Kind
) -> None:
    ref = f"oci-layout:{tmp_path}:evals"

    pinned = await sources.publish(data, ref, kind=kind)
    pulled = await sources.pull(ref)

    assert pulled.data == data and pulled.ref == pinned
    index = json.loads((tmp_path / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["artifactType"] == artifacts.DATASET_ARTIFACT_TYPE
    manifest = json.loads((tmp_path / "blobs" / "sha256" / entry["digest"][7:]).read_text())
    assert manifest["artifactType"] == artifacts.DATASET_ARTIFACT_TYPE
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == kind.media_type
    assert layer["annotations"][artifacts.TITLE_ANNOTATION] == kind.filename
