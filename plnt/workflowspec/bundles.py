"""A revision's spec bytes with the sub-workflows it calls: one bundle, one mechanism.

Why a bundle: a runner is handed one spec (a file the local target writes, a value the
Kubernetes target puts in a ConfigMap) and must never fetch at invoke time. A workflow
that calls pinned sub-workflows therefore travels as one JSON document holding the top
spec and every spec of its tree, keyed by digest, through the very same path. A workflow
that calls none travels as its own bytes, unchanged, so nothing about existing revisions
moves.

Every entry is held to its key's digest when unpacked: a bundle cannot smuggle other
bytes under a pinned digest. No I/O here. Errors are `documents.SpecError`, naming the
entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from plnt.workflowspec import dag, digests, documents, model

KIND = "WorkflowBundle"


@dataclass(frozen=True)
class Bundle:
    """The top spec's bytes and digest, and the called specs' bytes by digest."""

    spec: bytes
    digest: str
    workflows: dict[str, bytes] = field(default_factory=dict)


def pack(spec: bytes, workflows: Mapping[str, bytes]) -> bytes:
    """The bytes a runner is given: `spec` itself when it calls nothing, else a bundle."""
    if not workflows:
        return spec
    document = {
        "apiVersion": model.API_VERSION,
        "kind": KIND,
        "digest": digests.compute(spec),
        "spec": spec.decode("utf-8"),
        "workflows": {digest: workflows[digest].decode("utf-8") for digest in sorted(workflows)},
    }
    return json.dumps(document, indent=1).encode("utf-8")


def unpack(data: bytes) -> Bundle:
    """The top spec and its sub-workflows from a runner's spec bytes (plain or bundled)."""
    document = _bundle_document(data)
    if document is None:
        return Bundle(spec=data, digest=digests.compute(data))
    top = document.get("spec")
    called = document.get("workflows")
    if not isinstance(top, str) or not isinstance(called, dict):
        raise documents.SpecError(
            [dag.Problem("<bundle>", "a bundle needs `spec` (text) and `workflows` (an object)")]
        )
    spec = top.encode("utf-8")
    digest = digests.compute(spec)
    problems: list[dag.Problem] = []
    if document.get("digest") != digest:
        problems.append(
            dag.Problem("<bundle>.digest", f"names {document.get('digest')}; `spec` is {digest}")
        )
    workflows: dict[str, bytes] = {}
    for key, text in called.items():
        if not isinstance(text, str):
            problems.append(dag.Problem(f"<bundle>.workflows[{key}]", "must be the spec's text"))
            continue
        entry = text.encode("utf-8")
        actual = digests.compute(entry)
        if actual != key:
            problems.append(dag.Problem(f"<bundle>.workflows[{key}]", f"the text is {actual}"))
        workflows[key] = entry
    if problems:
        raise documents.SpecError(problems)
    return Bundle(spec=spec, digest=digest, workflows=workflows)


def top_digest(data: bytes) -> str:
    """The digest of the top spec in a runner's spec bytes (plain or bundled)."""
    return unpack(data).digest


def _bundle_document(data: bytes) -> dict[str, object] | None:
    """The bundle's JSON object, or None for a plain spec (YAML, or JSON of kind Workflow)."""
    if not data.lstrip().startswith(b"{"):
        return None
    try:
        document = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("kind") != KIND:
        return None
    return document
