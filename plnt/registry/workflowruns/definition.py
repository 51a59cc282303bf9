"""WorkflowRun's definition: names, subresources, printer columns and transition rules.

The served subresources are `status`, `scale`, and the runtime operations `invoke`,
`invocationlog` (the log of recent calls; `invocations`, its name before the Invocation
kind took the plural, still answers, with a deprecation warning), `proxy` (the runners' own
HTTP API, OpenAI's included), `rollback`, `abort`, `promote`, `retry` and `bench` (served
by `plnt.apiserver`; a bench's checks are `bench.py` here). A server
that deploys runs (one with a DeployControl) uses `with_teardown()`, whose strategy adds the
`plnt.work/teardown` finalizer on create so deleting a run waits until its runners are gone,
and marks each new generation `Reconciling=True` until the saga reports on it.
"""

from __future__ import annotations

import dataclasses

from plnt.api.workflowruns import GROUP, KIND, VERSION, WorkflowRun
from plnt.registry import tables
from plnt.registry.definitions import PrinterColumn, ResourceDefinition, Subresource
from plnt.registry.objects import Object, lookup
from plnt.registry.workflowruns import transitions
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy


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
        Subresource("invoke", "WorkflowRunInvocation", ("create",)),
        Subresource("invocationlog", "WorkflowRunInvocationList", ("get",)),
        Subresource("invocations", "WorkflowRunInvocationList", ("get",)),  # deprecated
        Subresource("proxy", "WorkflowRunProxyOptions", ("create", "get")),
        Subresource("rollback", KIND, ("create",)),
        Subresource("abort", "Status", ("create",), group="", version="v1"),
        Subresource("promote", "Status", ("create",), group="", version="v1"),
        Subresource("retry", "Status", ("create",), group="", version="v1"),
        Subresource("bench", "Bench", ("create", "get")),
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
    transitions=transitions.workflowrun_transitions,
)


def with_teardown(*, standalone: bool = True) -> ResourceDefinition:
    """The WorkflowRun definition of a server with sagas: new runs get the teardown
    finalizer, new generations the Reconciling condition; a standalone one warns that it
    cannot start `kubernetes` runners, one in a cluster does not."""
    strategy = WorkflowRunStrategy(
        model=WorkflowRun, teardown_finalizer=True, local_only=standalone
    )
    return dataclasses.replace(DEFINITION, strategy=strategy)
