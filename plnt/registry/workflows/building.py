"""What the scans of the sources describe: one Workflow per namespace and spec name.

Pure: scans in, objects out (their content only: the metadata that identifies them, spec
and status; `syncing` keeps uid, creationTimestamp and generation). A spec is grouped
under its `metadata.name`; one that does not parse is grouped under the name it appears
to have (`scanning.Found.name_hint`), so it is listed beside its valid versions, with its
reason in `status.versionErrors`, rather than hidden.

Versions are ordered newest first by their version (the spec's `metadata.version`, else
the tag or key) in natural order (`1.10.0` after `1.9.0`, a leading `v` ignored), then by
tag and source; `spec.latestVersion` is the first valid one, and `spec`'s description,
inputs, steps and backends are its.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from plnt.api.workflowruns import API_VERSION
from plnt.api.workflows import (
    KIND,
    BackendRequirement,
    SourceError,
    VersionError,
    WorkflowCatalogSpec,
    WorkflowCatalogStatus,
    WorkflowStep,
    WorkflowVersion,
)
from plnt.registry.objects import Object
from plnt.workflowspec import model, scanning

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class SourceState:
    """A source as the catalog knows it: where it is listed, what it held when it was last
    listed, and why the last listing failed (the older listing is kept until one works)."""

    source: str
    namespaces: tuple[str, ...] = (DEFAULT_NAMESPACE,)
    found: tuple[scanning.Found, ...] = ()
    error: scanning.Problem | None = None


@dataclass(slots=True)
class _Entry:
    version: WorkflowVersion
    found: scanning.Found


@dataclass(slots=True)
class _Group:
    entries: list[_Entry] = field(default_factory=list)


def version_key(label: str) -> tuple[tuple[int, int, str], ...]:
    """A natural sort key: runs of digits compare as numbers, the rest as text."""
    text = label[1:] if label[:1] in ("v", "V") and label[1:2].isdigit() else label
    return tuple(
        (1, int(part), "") if part.isdigit() else (0, 0, part)
        for part in re.split(r"(\d+)", text)
        if part
    )


def build(states: Iterable[SourceState]) -> dict[tuple[str, str], Object]:
    """The objects `states` describe, by (namespace, name)."""
    groups: dict[tuple[str, str], _Group] = {}
    errors_by_namespace: dict[str, list[SourceError]] = {}
    for state in states:
        for namespace in state.namespaces:
            if state.error is not None:
                errors_by_namespace.setdefault(namespace, []).append(
                    SourceError(
                        source=state.source,
                        reason=state.error.reason,
                        message=state.error.message,
                    )
                )
            for found in state.found:
                group = groups.setdefault((namespace, found.name_hint), _Group())
                group.entries.append(_Entry(_version(state.source, found), found))
    out: dict[tuple[str, str], Object] = {}
    for (namespace, name), group in sorted(groups.items()):
        out[(namespace, name)] = _object(
            namespace, name, group.entries, errors_by_namespace.get(namespace, [])
        )
    return out


def _version(source: str, found: scanning.Found) -> WorkflowVersion:
    label = found.location
    if found.workflow is not None and found.workflow.metadata.version:
        label = found.workflow.metadata.version
    return WorkflowVersion(
        version=label,
        tag=found.location,
        source=source,
        ref=found.ref,
        digest=found.digest,
        valid=found.workflow is not None,
        signed_by=found.signed_by,
    )


def _object(
    namespace: str, name: str, entries: Sequence[_Entry], source_errors: Sequence[SourceError]
) -> Object:
    ordered = sorted(entries, key=lambda e: (e.version.source, e.version.tag))
    ordered.sort(key=lambda e: version_key(e.version.version), reverse=True)
    newest = next((e for e in ordered if e.found.workflow is not None), None)
    spec = WorkflowCatalogSpec(versions=[e.version for e in ordered])
    if newest is not None and newest.found.workflow is not None:
        _describe(spec, newest.version.version, newest.found.workflow)
    status = WorkflowCatalogStatus(
        source_errors=list(source_errors) or None,
        version_errors=[
            VersionError(
                source=e.version.source,
                tag=e.version.tag,
                digest=e.version.digest,
                reason=e.found.problem.reason,
                message=e.found.problem.message,
            )
            for e in ordered
            if e.found.problem is not None
        ]
        or None,
    )
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec.to_wire(),
    }
    wire_status = status.to_wire()
    if wire_status:
        obj["status"] = wire_status
    return obj


def _describe(spec: WorkflowCatalogSpec, label: str, workflow: model.Workflow) -> None:
    spec.latest_version = label
    spec.description = workflow.metadata.description
    spec.inputs = dict(workflow.inputs)
    spec.steps = [_step(step) for step in workflow.steps]
    spec.backends = _backends(workflow) or None
    spec.chat_input = workflow.chat.input if workflow.chat else None


def _step(step: model.AnyStep) -> WorkflowStep:
    if isinstance(step, model.ModelStep):
        return WorkflowStep(
            id=step.id, kind="model", needs=list(step.needs), mode=step.mode, model=step.model
        )
    return WorkflowStep(id=step.id, kind=step.kind, needs=list(step.needs))


def _backends(workflow: model.Workflow) -> list[BackendRequirement]:
    """One requirement per (mode, model) the model steps ask for, in step order."""
    needs: dict[tuple[str, str | None], list[str]] = {}
    for step in workflow.steps:
        if isinstance(step, model.ModelStep):
            needs.setdefault((step.mode, step.model), []).append(step.id)
    return [
        BackendRequirement(mode=mode, model=model_name, steps=steps)
        for (mode, model_name), steps in needs.items()
    ]
