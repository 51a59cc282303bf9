"""Evaluation datasets: the cases a quality gate reads from a pinned document.

The one reader of a dataset's bytes. The gate (`plnt.sagas.gating.evaluating`) and `plnt push`
both call `read`, so a dataset that push accepts is one the gate will read, case for case.
A dataset is published like a workflow spec (same sources, same digests), as an artifact
of its own kind (`sources.artifacts.DATASET`).

Three forms, each case as in `spec.canary.evaluation.cases`:

* a YAML or JSON list of cases;
* a mapping that holds only `cases: [...]`;
* JSON Lines: one case (a JSON object) a line, blank lines skipped.

Every problem is named where it is: `cases[2].expect[0].regex: …` in a document,
`line 4: cases[2].name: …` in JSON Lines.

Exceptions:

    documents.WorkflowSpecError
    └── InvalidDataset     the bytes are not a valid dataset; the message names each problem

No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import yaml

from plnt.api import evaluations as ev
from plnt.workflowspec import documents
from plnt.workflowspec.sources import artifacts

LINES_SUFFIXES = (".jsonl", ".ndjson")
"""File names that say JSON Lines: `plnt push` reads them as datasets whatever they hold."""
SPEC_KEYS = frozenset({"apiVersion", "kind", "steps"})
"""Keys only a workflow spec has: a mapping with one of them is not a dataset."""
MAX_PROBLEMS = 10
"""Problems named in one message; a systematic mistake is not repeated 200 times."""

_CASES = pydantic.TypeAdapter(list[ev.EvaluationCase])
_EMPTY = "expected a non-empty list of cases (or {cases: [...]})"


class InvalidDataset(documents.WorkflowSpecError):
    """The bytes are not a list of valid cases; the message names where and why."""


@dataclass(frozen=True)
class Dataset:
    """A dataset's cases, and whether its bytes were JSON Lines (else one document)."""

    cases: list[ev.EvaluationCase]
    lines: bool

    @property
    def artifact(self) -> artifacts.Kind:
        """The artifact it is published as: its layer's media type says which form."""
        return artifacts.DATASET_LINES if self.lines else artifacts.DATASET


def parse_dataset(data: bytes) -> list[ev.EvaluationCase]:
    """The cases of a dataset in any of its forms; `InvalidDataset` naming what is wrong."""
    return read(data).cases


def read(data: bytes) -> Dataset:
    """Parse and check a dataset; `InvalidDataset` naming each problem's case, line and field."""
    if len(data) > ev.MAX_DATASET_BYTES:
        raise InvalidDataset(f"{len(data)} bytes, more than {ev.MAX_DATASET_BYTES}")
    text = data.decode("utf-8", errors="replace")
    try:
        document: Any = yaml.safe_load(text)
    except yaml.YAMLError as error:  # several JSON objects, one a line, are not one YAML document
        return _lines(text, yaml_error=error)
    if isinstance(document, list):
        return Dataset(_cases(document, lines=None), lines=False)
    if isinstance(document, dict) and "cases" in document:
        others = ", ".join(sorted(str(key) for key in document if key != "cases"))
        if others:
            raise InvalidDataset(f"a dataset mapping holds only cases; found also: {others}")
        if not isinstance(document["cases"], list):
            raise InvalidDataset("cases: expected a list of cases")
        return Dataset(_cases(document["cases"], lines=None), lines=False)
    if document is None:
        raise InvalidDataset(_EMPTY)
    if isinstance(document, dict) and len(_numbered(text)) == 1:
        return _lines(text, yaml_error=None)  # one JSON object on one line is one YAML mapping
    if isinstance(document, dict):
        keys = ", ".join(sorted(str(key) for key in document))
        found = f"a mapping without cases (keys: {keys})"
    else:
        found = f"a single {type(document).__name__} ({str(document)[:40]!r})"
    raise InvalidDataset(f"expected a list of cases, {{cases: [...]}} or JSON Lines; found {found}")


def is_dataset(data: bytes, *, name: str = "") -> bool:
    """Whether a file is a dataset rather than a workflow spec, as `plnt push` decides.

    A `.jsonl`/`.ndjson` name, a list, a mapping with `cases` and no workflow key
    (`apiVersion`, `kind`, `steps`), or lines of JSON objects that are not one YAML
    document: a dataset. Anything else is read as a workflow spec, whose loader then
    names what is wrong with it.
    """
    if name.lower().endswith(LINES_SUFFIXES):
        return True
    try:
        document: Any = yaml.safe_load(data)
    except yaml.YAMLError:
        numbered = _numbered(data.decode("utf-8", errors="replace"))
        return bool(numbered) and _is_json_object(numbered[0][1])
    if isinstance(document, list):
        return True
    return isinstance(document, dict) and "cases" in document and not SPEC_KEYS & set(document)


def _numbered(text: str) -> list[tuple[int, str]]:
    """The non-blank lines, with their 1-based numbers."""
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _lines(text: str, *, yaml_error: yaml.YAMLError | None) -> Dataset:
    numbered = _numbered(text)
    items: list[Any] = []
    for number, line in numbered:
        try:
            items.append(json.loads(line))
        except ValueError as error:
            if not items and yaml_error is not None:
                raise InvalidDataset(
                    f"neither YAML, JSON nor JSON Lines: line {number}: {_json_problem(error)}"
                ) from None
            raise InvalidDataset(f"line {number}: not JSON: {_json_problem(error)}") from None
    return Dataset(_cases(items, lines=[number for number, _ in numbered]), lines=True)


def _json_problem(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} (column {error.colno})"
    return str(error)


def _cases(items: list[Any], *, lines: Sequence[int] | None) -> list[ev.EvaluationCase]:
    """Validate the cases; `lines[i]` is where case `i` was read, for JSON Lines."""
    if not items:
        raise InvalidDataset(_EMPTY)
    if len(items) > ev.MAX_CASES:
        raise InvalidDataset(f"{len(items)} cases, more than {ev.MAX_CASES}")
    try:
        cases = _CASES.validate_python(items)
    except pydantic.ValidationError as error:
        problems = [_problem(item, lines) for item in error.errors()]
        raise InvalidDataset(_joined(problems)) from None
    seen: dict[str, int] = {}
    problems = []
    for index, case in enumerate(cases):
        if case.name in seen:
            first = seen[case.name]
            problems.append(
                f'{_where(index, lines)}.name: duplicate case name "{case.name}" '
                f"(also cases[{first}])"
            )
        seen.setdefault(case.name, index)
    if problems:
        raise InvalidDataset(_joined(problems))
    return cases


def _where(index: int, lines: Sequence[int] | None) -> str:
    return f"line {lines[index]}: cases[{index}]" if lines is not None else f"cases[{index}]"


def _problem(item: Any, lines: Sequence[int] | None) -> str:
    """One validation problem as `cases[0].expect[1].regex: message` (JSON Lines: `line N: …`)."""
    index, *rest = item["loc"]  # a list's items are located by their index first
    path = _where(index, lines)
    for part in rest:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f"{path}: {item['msg']}"


def _joined(problems: list[str]) -> str:
    shown = "; ".join(problems[:MAX_PROBLEMS])
    more = len(problems) - MAX_PROBLEMS
    return f"{shown}; and {more} more" if more > 0 else shown
