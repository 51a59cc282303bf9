"""The catalog's sources file: which sources the catalog reads, and where each is listed.

```yaml
sources:
  - source: oci://registry.example.com/team/summarize   # every tag of the repository
    namespaces: [default, team-a]                       # default: [default]
  - source: s3://specs/prod/                            # every .yaml/.yml/.json key under it
  - source: oci-layout:examples                         # every tag of a layout
  - source: oci-layout:*                                # every layout under the layout root
```

A source is named as `plnt.workflowspec.scanning` reads it. Parsing is pure (`parse`);
`load` reads the file. Errors: `SourcesError`, whose message names the file and every
problem, so `plnt up` and `plnt serve` refuse a bad file before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import yaml

from plnt.registry.labelnames import dns1123_label_errors
from plnt.registry.workflows.building import DEFAULT_NAMESPACE
from plnt.workflowspec import errors as spec_errors
from plnt.workflowspec import references, scanning


class SourcesError(Exception):
    """The sources file cannot be read, or says something the catalog cannot use."""


@dataclass(frozen=True, slots=True)
class CatalogSource:
    """One source, and the namespaces its workflows are listed in."""

    source: str
    namespaces: tuple[str, ...] = (DEFAULT_NAMESPACE,)


class _Source(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    source: str
    namespaces: list[str] = pydantic.Field(default_factory=lambda: [DEFAULT_NAMESPACE])


class _File(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    sources: list[_Source] = pydantic.Field(default_factory=list)


def source_problem(source: str) -> str | None:
    """Why `source` names no source the catalog can read (None when it does)."""
    if source == scanning.EVERY_LAYOUT:
        return None
    if source.startswith(references.S3_SCHEME):
        bucket = source[len(references.S3_SCHEME) :].partition("/")[0]
        return None if bucket else "expected s3://BUCKET/PREFIX"
    try:
        ref = references.parse(source)
    except spec_errors.InvalidReference as error:
        return str(error)
    if ref.digest is not None:
        return "a source names a repository, layout or tag, not a digest"
    return None


def parse(data: bytes | str, *, where: str = "the sources file") -> tuple[CatalogSource, ...]:
    """The sources `data` lists; `SourcesError` naming every problem otherwise."""
    try:
        document: Any = yaml.safe_load(data) or {}
        parsed = _File.model_validate(document)
    except yaml.YAMLError as error:
        raise SourcesError(f"{where}: not valid YAML: {error}") from error
    except pydantic.ValidationError as error:
        wrong = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<document>'}: {e['msg']}"
            for e in error.errors()
        )
        raise SourcesError(f"{where}: {wrong}") from error
    problems: list[str] = []
    out: list[CatalogSource] = []
    for index, entry in enumerate(parsed.sources):
        if (problem := source_problem(entry.source)) is not None:
            problems.append(f"sources[{index}].source: {problem}")
        if not entry.namespaces:
            problems.append(f"sources[{index}].namespaces: at least one namespace")
        for n, namespace in enumerate(entry.namespaces):
            for message in dns1123_label_errors(namespace):
                problems.append(f"sources[{index}].namespaces[{n}]: {message}")
        out.append(CatalogSource(entry.source, tuple(dict.fromkeys(entry.namespaces))))
    if problems:
        raise SourcesError(f"{where}: " + "; ".join(problems))
    return tuple(out)


def load(path: Path) -> tuple[CatalogSource, ...]:
    """The sources the file at `path` lists (see `parse`)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SourcesError(f"{path}: cannot read: {error.strerror or error}") from error
    return parse(data, where=str(path))
