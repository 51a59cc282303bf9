"""WorkflowRun's definition: names, subresources, printer columns and transition rules.

The served subresources are `status`, `scale`, and the runtime operations `invoke`,
`invocationlog` (the log of recent calls; `invocations`, its name before the Invocation
kind took the plural, still answers, with a deprecation warning), `proxy` (the runners' own
HTTP API, OpenAI's included), `rollback`, `abort`, `promote`, `retry`, `bench` and
`shadow` (the pairs of shadow traffic), served by `plnt.apiserver.workflowruns` (a bench's
checks are `bench.py` here). Each declares what the generic machinery cannot derive: the
schemas of its body and of an answer that is not a kind of its own (the OpenAPI
documents), and whether it is long-running (no max-in-flight slot). The kind's share of
the standalone default policy is its `grants`.

A server that deploys runs (one with a DeployControl) uses `with_teardown()`, whose
strategy adds the `plnt.work/teardown` finalizer on create so deleting a run waits until
its runners are gone, and marks each new generation `Reconciling=True` until the saga
reports on it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from plnt.api import names
from plnt.api.bench import Bench
from plnt.api.invocations import InvokeRequest
from plnt.api.shadows import ShadowList
from plnt.api.workflowruns import GROUP, KIND, VERSION, WorkflowRun, WorkflowRunRollback
from plnt.registry import tables
from plnt.registry.definitions import (
    INVOKERS,
    READ_VERBS,
    VIEWERS,
    Grant,
    PrinterColumn,
    ResourceDefinition,
    Schema,
    Subresource,
)
from plnt.registry.objects import Object, lookup
from plnt.registry.workflowruns import transitions
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy
from plnt.workflowspec.signers import SignaturePolicy


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


def slo_summary(obj: Object) -> str | None:
    """`status.slo` in a cell: `met (budget 62%)`, `missed timePerOutputToken`, `no calls`."""
    slo = lookup(obj, "status", "slo")
    if not isinstance(slo, dict):
        return None
    if not slo.get("calls"):
        return "no calls"
    missed = [
        str(o.get("name"))
        for o in slo.get("objectives") or []
        if isinstance(o, dict) and o.get("met") is False
    ]
    budget = slo.get("errorBudgetRemaining")
    left = f" (budget {round(budget * 100)}%)" if isinstance(budget, int | float) else ""
    if missed:
        return "missed " + ",".join(missed) + left
    return ("met" if slo.get("met") else "unmeasured") + left


_RUNNERS_ANSWER: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "description": "The runner's answer, unchanged.",
}
_INVOCATION_LIST: dict[str, Any] = {
    "type": "object",
    "description": "The last invocations of a run made by this API server.",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "time": {"type": "string"},
                    "revision": {"type": "integer"},
                    "endpoint": {"type": "string"},
                    "status": {"type": "integer"},
                    "durationMs": {"type": "number"},
                    "cache": {"type": "string"},
                    "timeToFirstTokenMs": {"type": "number"},
                    "timePerOutputTokenMs": {"type": "number"},
                },
            },
        },
    },
}
_INVOCATION_LOG = Schema("WorkflowRunInvocationList", json_schema=_INVOCATION_LIST)
_BENCH = Schema("Bench", model=Bench)

DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=names.WORKFLOWRUNS,
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
        Subresource(
            "invoke",
            "WorkflowRunInvocation",
            ("create",),
            body=Schema("WorkflowRunInvocationRequest", model=InvokeRequest),
            answer=Schema("WorkflowRunInvocation", json_schema=_RUNNERS_ANSWER),
            long_running=True,  # it waits as long as the workflow runs, streamed or not
        ),
        Subresource(
            "invocationlog",
            "WorkflowRunInvocationList",
            ("get",),
            answer=_INVOCATION_LOG,
            long_running_when_watched=True,
        ),
        Subresource(  # the invocation log's deprecated name (the plural of Invocation now)
            "invocations",
            "WorkflowRunInvocationList",
            ("get",),
            answer=_INVOCATION_LOG,
            long_running_when_watched=True,
        ),
        Subresource(
            "proxy",
            "WorkflowRunProxyOptions",
            ("create", "get"),
            answer=Schema("WorkflowRunProxyOptions", json_schema=_RUNNERS_ANSWER),
            long_running=True,  # the OpenAI-compatible relay, streamed when the model streams
        ),
        Subresource(
            "rollback",
            KIND,
            ("create",),
            body=Schema("WorkflowRunRollback", model=WorkflowRunRollback),
            body_required=False,  # no body: the previous revision
        ),
        Subresource("abort", "Status", ("create",), group="", version="v1"),
        Subresource("promote", "Status", ("create",), group="", version="v1"),
        Subresource("retry", "Status", ("create",), group="", version="v1"),
        Subresource(
            "bench",
            "Bench",
            ("create", "get"),
            body=_BENCH,
            body_required=False,  # no body: the defaults
            answer=_BENCH,  # the bench started, then its progress and results
            long_running=True,  # it measures the runners for seconds to minutes
        ),
        Subresource(
            "shadow",
            "WorkflowRunShadowList",
            ("get",),
            answer=Schema("WorkflowRunShadowList", model=ShadowList),
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
        PrinterColumn(
            "SLO",
            "string",
            "Live attainment of spec.slo over its window, and the error budget left.",
            slo_summary,
            priority=1,
        ),
    ),
    field_labels=lambda obj: {"status.phase": str(lookup(obj, "status", "phase") or "")},
    grants=(
        # Viewers read runs and follow a bench's progress.
        Grant(VIEWERS, READ_VERBS, ("", "status", "scale", "bench", "shadow")),
        # Invokers invoke, start and follow benches and use the OpenAI endpoint (GET
        # /v1/models, POST /v1/chat/completions through `proxy`), but edit nothing.
        Grant(INVOKERS, ("create",), ("invoke",)),
        Grant(INVOKERS, ("get", "create"), ("bench", "proxy")),
    ),
    transitions=transitions.workflowrun_transitions,
)


def with_teardown(
    *, standalone: bool = True, signatures: SignaturePolicy | None = None
) -> ResourceDefinition:
    """The WorkflowRun definition of a server with sagas: new runs get the teardown
    finalizer, new generations the Reconciling condition; a standalone one warns that it
    cannot start `kubernetes` runners, one in a cluster does not. With `signatures`, runs in
    the namespaces it binds must name one of its trusted signers."""
    strategy = WorkflowRunStrategy(
        model=WorkflowRun, teardown_finalizer=True, local_only=standalone, signatures=signatures
    )
    return dataclasses.replace(DEFINITION, strategy=strategy)
