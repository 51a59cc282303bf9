"""WorkflowRun: definition, strategy and printer columns."""

from __future__ import annotations

from plnt.api import errors
from plnt.api.workflowruns import GROUP, KIND, VERSION, WorkflowRun
from plnt.registry import tables
from plnt.registry.definitions import (
    Object,
    PrinterColumn,
    ResourceDefinition,
    Subresource,
    lookup,
)
from plnt.registry.strategy import Strategy


def _backend(obj: Object) -> str | None:
    promoted = lookup(obj, "status", "backend")
    if promoted:
        return str(promoted)
    name = lookup(obj, "spec", "backend", "name")
    if name:
        return str(name)
    return "<selector>" if lookup(obj, "spec", "backend", "selector") else None


def _replicas(obj: Object) -> str:
    ready = lookup(obj, "status", "readyReplicas") or 0
    desired = lookup(obj, "spec", "replicas")
    return f"{ready}/{1 if desired is None else desired}"


def _short_digest(obj: Object) -> str | None:
    digest = lookup(obj, "status", "digest") or lookup(obj, "spec", "workflow", "digest")
    return str(digest)[:19] if digest else None


def _ready_reason(obj: Object) -> str | None:
    for condition in lookup(obj, "status", "conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("reason") or condition.get("status"))
    return None


class WorkflowRunStrategy(Strategy):
    """Defaulting and rules of WorkflowRun beyond its schema."""

    def validate_semantics(self, obj: Object) -> list[errors.Cause]:
        causes: list[errors.Cause] = []
        backend = lookup(obj, "spec", "backend")
        if isinstance(backend, dict) and backend.get("name") and backend.get("selector"):
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    "Invalid value: specify either name or selector, not both",
                    "spec.backend",
                )
            )
        return causes

    def warnings(self, obj: Object) -> list[str]:
        if lookup(obj, "spec", "target") == "kubernetes":
            return [
                "spec.target: kubernetes runners need plnt installed in a cluster; "
                "standalone plnt runs local runners only"
            ]
        return []


DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural="workflowruns",
    singular="workflowrun",
    model=WorkflowRun,
    strategy=WorkflowRunStrategy(model=WorkflowRun),
    short_names=("wfr",),
    categories=("plnt",),
    description="A workflow deployed from a pinned spec to an inference backend.",
    subresources=(
        Subresource("status", KIND, ("get", "patch", "update")),
        Subresource(
            "scale", "Scale", ("get", "patch", "update"), group="autoscaling", version="v1"
        ),
    ),
    columns=(
        PrinterColumn(
            "Workflow",
            "string",
            "The workflow spec reference.",
            lambda o: lookup(o, "spec", "workflow", "ref"),
        ),
        PrinterColumn("Backend", "string", "The inference backend in use.", _backend),
        PrinterColumn("Replicas", "string", "Ready and desired runner replicas.", _replicas),
        PrinterColumn(
            "Phase", "string", "Lifecycle phase.", lambda o: lookup(o, "status", "phase")
        ),
        PrinterColumn(
            "Revision",
            "integer",
            "The promoted revision.",
            lambda o: lookup(o, "status", "revision"),
        ),
        PrinterColumn("Age", "string", "Time since creation.", tables.age),
        PrinterColumn("Digest", "string", "Digest of the spec.", _short_digest, priority=1),
        PrinterColumn(
            "Target",
            "string",
            "Where runners run.",
            lambda o: lookup(o, "spec", "target"),
            priority=1,
        ),
        PrinterColumn(
            "Ready", "string", "Reason of the Ready condition.", _ready_reason, priority=1
        ),
    ),
    field_labels=lambda obj: {"status.phase": str(lookup(obj, "status", "phase") or "")},
)
