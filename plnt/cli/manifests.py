"""Reading `-f` files of WorkflowRuns: YAML, several documents, `-` for stdin.

Everything wrong with the file is the user's to fix, so every failure is a
`ManifestError` (exit code 2) naming the file, before any request is made: a run
is never half-applied because its third document was a ConfigMap.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from plnt.cli import exits


class ManifestError(exits.UsageError):
    """The file cannot be read, is not YAML, or holds something other than WorkflowRuns."""


def read(filename: Path) -> str:
    """The text of `filename`, or of stdin for `-`."""
    try:
        if str(filename) == "-":
            return sys.stdin.read()
        return filename.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ManifestError(f"{filename}: {reason}") from error


def workflowruns(filename: Path, text: str, *, namespace: str | None) -> list[dict[str, Any]]:
    """The WorkflowRun documents of `text`; `namespace` (from `-n`) must match any declared."""
    try:
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise ManifestError(f"{filename}: not valid YAML: {error}") from error
    if not loaded:
        raise ManifestError(f"{filename}: no objects found")
    for index, document in enumerate(loaded, start=1):
        if not isinstance(document, dict) or document.get("kind") != "WorkflowRun":
            kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
            raise ManifestError(f"{filename}: document {index} is a {kind}, not a WorkflowRun")
        declared = (document.get("metadata") or {}).get("namespace")
        if namespace and declared and declared != namespace:
            raise ManifestError(
                f'{filename}: the namespace from the provided object "{declared}" does not '
                f'match the namespace "{namespace}"; you must pass the same namespace'
            )
    return loaded
