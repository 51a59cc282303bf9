"""What a bench request means for a WorkflowRun: its checks and the revisions it measures.

`bench_spec` turns a request body into a `BenchSpec`, with every field error at once as
kube's 422 Invalid naming the field (`spec.durationSeconds`, `spec.rate`,
`spec.concurrency`, `spec.revision`, `spec.compare[1]` …), including the rules that
span fields (a rate and a concurrency together; a revision and a comparison together).
`targets` resolves the selectors against the run's `status.traffic` (what serves now):
"stable" is the promoted revision (`status.revision`), "canary" the other revision that
takes traffic, N a revision with ready runners. Pure functions; the API server calls
them before it starts the bench's workflow, and the workflow's activity resolves the
revision numbers to endpoints again when it runs, so a retried measurement calls the
runners that serve then.

Errors (API errors): Invalid (422) for a malformed or out-of-range spec and for a
revision that takes no traffic; Conflict (409) naming the run's phase when no revision
is ready at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pydantic

from plnt.api import bench as wire
from plnt.api import errors, names
from plnt.registry import fieldcauses
from plnt.registry.objects import Object, lookup

QUALIFIED_KIND = "Bench.plnt.work"


@dataclass(frozen=True)
class Serving:
    """One revision of `status.traffic` with ready runners."""

    revision: int
    digest: str
    endpoints: tuple[str, ...]
    weight: int


@dataclass(frozen=True)
class Target:
    """A revision a bench measures: the selector as asked, and the revision it names now."""

    label: str
    revision: int


def _invalid(name: str, causes: list[errors.Cause]) -> errors.Invalid:
    return errors.Invalid.of(QUALIFIED_KIND, name, causes)


def bench_spec(body: Any, *, name: str) -> wire.BenchSpec:
    """The request's spec, checked whole; `name` (the run's) goes into the 422 message.

    The body is a `Bench` (`{"apiVersion":"plnt.work/v1","kind":"Bench","spec":{...}}`);
    an empty body means every default.
    """
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise errors.BadRequest("the bench body must be a JSON object (a Bench)")
    try:
        bench = wire.Bench.model_validate(body)
    except pydantic.ValidationError as error:
        found = [
            errors.Cause(c.reason, c.message, c.field)
            for c in fieldcauses.validation_causes(error, model=wire.Bench)
        ]
        raise _invalid(name, found) from error
    spec = bench.spec
    causes: list[errors.Cause] = []
    if spec.rate is not None and spec.concurrency is not None:
        causes.append(
            errors.Cause(
                "FieldValueForbidden",
                "Forbidden: may not be set together with spec.rate (a rate is an open loop,"
                " a concurrency a closed loop: choose one)",
                "spec.concurrency",
            )
        )
    if spec.compare is not None and spec.revision is not None:
        causes.append(
            errors.Cause(
                "FieldValueForbidden",
                "Forbidden: may not be set together with spec.revision",
                "spec.compare",
            )
        )
    if spec.compare is not None and len(spec.compare) == 2 and spec.compare[0] == spec.compare[1]:
        causes.append(
            errors.Cause(
                "FieldValueDuplicate",
                f"Duplicate value: {fieldcauses.go_value(spec.compare[1])}",
                "spec.compare[1]",
            )
        )
    size = len(json.dumps(spec.inputs, separators=(",", ":"))) if spec.inputs is not None else 0
    if size > wire.MAX_INPUT_BYTES:
        causes.append(
            errors.Cause(
                "FieldValueTooLong",
                f"Too long: may not be more than {wire.MAX_INPUT_BYTES} bytes (got {size})",
                "spec.inputs",
            )
        )
    if causes:
        raise _invalid(name, causes)
    if spec.rate is None and spec.concurrency is None:
        spec = spec.model_copy(update={"concurrency": wire.DEFAULT_CONCURRENCY})
    return spec


def serving(obj: Object) -> list[Serving]:
    """The revisions of `status.traffic` that have ready runners (any weight)."""
    out: list[Serving] = []
    for entry in lookup(obj, "status", "traffic") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("revision"), int):
            continue
        endpoints = tuple(str(e).rstrip("/") for e in entry.get("endpoints") or [] if e)
        if endpoints:
            weight = entry.get("weight")
            out.append(
                Serving(
                    revision=int(entry["revision"]),
                    digest=str(entry.get("digest") or ""),
                    endpoints=endpoints,
                    weight=weight if isinstance(weight, int) else 0,
                )
            )
    return out


def resolve(obj: Object, selector: wire.Selector) -> Serving | None:
    """The serving revision `selector` names in `obj` now, or None."""
    revisions = serving(obj)
    stable = lookup(obj, "status", "revision")
    if selector == "stable":
        return next((s for s in revisions if s.revision == stable), None)
    if selector == "canary":
        return next((s for s in revisions if s.revision != stable), None)
    return next((s for s in revisions if s.revision == selector), None)


def _serving_text(obj: Object) -> str:
    stable = lookup(obj, "status", "revision")
    names = [
        f"{s.revision} ({'stable' if s.revision == stable else 'canary'})" for s in serving(obj)
    ]
    return ", ".join(names) or "none"


def targets(obj: Object, spec: wire.BenchSpec, *, name: str) -> list[Target]:
    """The revisions `spec` measures in `obj` now (409 when none is ready, 422 per unknown)."""
    if not serving(obj):
        phase = lookup(obj, "status", "phase") or "Pending"
        raise errors.Conflict.of(
            errors.GroupResource(names.GROUP, names.WORKFLOWRUNS),
            name,
            f"workflowrun {name} has no ready revision to bench (phase {phase})",
        )
    field = "spec.compare" if spec.compare else "spec.revision"
    out: list[Target] = []
    causes: list[errors.Cause] = []
    for index, selector in enumerate(spec.selectors()):
        found = resolve(obj, selector)
        path = f"{field}[{index}]" if spec.compare else field
        if found is None:
            shown = fieldcauses.go_value(selector)
            what = "no canary takes traffic" if selector == "canary" else "it has no ready runners"
            causes.append(
                errors.Cause(
                    "FieldValueNotFound",
                    f"Not found: {shown}: {what} (revisions serving: {_serving_text(obj)})",
                    path,
                )
            )
            continue
        out.append(Target(label=str(selector), revision=found.revision))
    if causes:
        raise _invalid(name, causes)
    if len({t.revision for t in out}) < len(out):
        raise _invalid(
            name,
            [
                errors.Cause(
                    "FieldValueDuplicate",
                    f"Duplicate value: {fieldcauses.go_value(spec.selectors()[1])}: both name"
                    f" revision {out[0].revision}",
                    "spec.compare[1]",
                )
            ],
        )
    return out
