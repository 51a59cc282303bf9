"""WorkflowRun's rules beyond its schema: the teardown finalizer, kstatus's Reconciling on
each new generation, backend and reference checks.

Admission refuses here what the deploy saga could never carry out (a reference the pull
cannot resolve, a backend named twice), so such mistakes are a 422 on the write instead
of a failed deploy later.

A server with sagas marks every new generation `Reconciling=True` in the very write that
makes it (and drops a `Stalled` about an older one), so a GitOps tool that reads the run
right after its create or spec change sees it in progress, not done: kstatus (Helm's
`--wait`, Flux, kpt) finds no `status.observedGeneration` on a new run and, on a changed
one, an observedGeneration that still names the previous generation. The saga's
reporter replaces these conditions once it reports on the generation
(`plnt.sagas.deploying.workflow.reporting`).

Where the server's signature policy binds the run's namespace (`plnt serve
--require-signatures`), a run whose `spec.workflow.verify` names none of the trusted signers
is refused here (`workflowspec.signers.admission_causes`): the pull could only fail it.
"""

from __future__ import annotations

from typing import Any

from plnt.api import errors
from plnt.api.meta import now_rfc3339
from plnt.api.slo import OBJECTIVE_FIELDS
from plnt.api.workflowruns import TEARDOWN_FINALIZER, WorkflowRun
from plnt.registry.labelnames import go_quote
from plnt.registry.objects import Object, lookup
from plnt.registry.strategy import Strategy
from plnt.workflowspec import errors as spec_errors
from plnt.workflowspec import references, signers

RECONCILING = "Reconciling"
STALLED = "Stalled"


class WorkflowRunStrategy(Strategy):
    """Defaulting and rules of WorkflowRun beyond its schema.

    `teardown_finalizer`: a server with sagas. Every new run gets `TEARDOWN_FINALIZER`
    (only a server with sagas may add it, since only the saga removes it), and every new
    generation is marked `Reconciling=True` until the saga reports on it. `local_only`:
    see the attribute.
    """

    def __init__(
        self,
        *,
        model: type[WorkflowRun],
        teardown_finalizer: bool = False,
        local_only: bool = True,
        signatures: signers.SignaturePolicy | None = None,
    ) -> None:
        super().__init__(model=model)
        self.teardown_finalizer = teardown_finalizer
        self.local_only = local_only
        self.signatures = signatures
        """The server's signature policy: runs in the namespaces it binds must name one of
        its trusted signers."""
        """No cluster behind this server (standalone): `spec.target: kubernetes` is warned
        about, since nothing here can start such runners."""

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        if not self.teardown_finalizer:
            return
        meta = obj["metadata"]
        finalizers = meta.get("finalizers")
        if finalizers is None:
            meta["finalizers"] = [TEARDOWN_FINALIZER]
        elif isinstance(finalizers, list) and TEARDOWN_FINALIZER not in finalizers:
            finalizers.append(TEARDOWN_FINALIZER)
        obj["status"] = {}
        mark_reconciling(obj, "Accepted", "generation 1 accepted; the deploy saga starts it")

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        super().prepare_for_update(obj, old)
        new_generation = lookup(obj, "metadata", "generation")
        if self.teardown_finalizer and new_generation != lookup(old, "metadata", "generation"):
            mark_reconciling(
                obj,
                "SpecChanged",
                f"generation {new_generation} accepted; the deploy saga takes it up next",
            )

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
        causes.extend(fallback_causes(backend, lookup(obj, "spec", "fallback")))
        causes.extend(_reference_causes(obj))
        causes.extend(
            errors.Cause(
                "FieldValueRequired" if "Required" in message else "FieldValueInvalid",
                message,
                field,
            )
            for field, message in signers.admission_causes(
                lookup(obj, "spec", "workflow", "verify"),
                namespace=str(lookup(obj, "metadata", "namespace") or ""),
                policy=self.signatures,
            )
        )
        route = lookup(obj, "spec", "route")
        target = lookup(obj, "spec", "target") or "local"
        if isinstance(route, dict) and route.get("enabled", True) and target != "kubernetes":
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    "Invalid value: an HTTPRoute carries the weights of runners in a cluster: "
                    "spec.route needs spec.target: kubernetes",
                    "spec.route",
                )
            )
        canary = lookup(obj, "spec", "canary")
        if isinstance(canary, dict) and canary.get("shadow") and not canary.get("evaluation"):
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    "Invalid value: shadow comparisons are scored by the quality gate: "
                    "spec.canary.shadow needs spec.canary.evaluation",
                    "spec.canary.shadow",
                )
            )
        causes.extend(slo_causes(lookup(obj, "spec", "slo")))
        return causes

    def warnings(self, obj: Object) -> list[str]:
        if self.local_only and lookup(obj, "spec", "target") == "kubernetes":
            return [
                "spec.target: kubernetes runners need plnt installed in a cluster; "
                "standalone plnt runs local runners only"
            ]
        return []


def fallback_causes(backend: Any, fallback: Any) -> list[errors.Cause]:
    """A fallback that is the primary itself would serve nothing the primary cannot.

    Only a primary named outright can be compared; one chosen by selector may still land
    on the fallback, which then serves nothing more (the runner refuses as before).
    """
    if not isinstance(fallback, dict) or not isinstance(backend, dict):
        return []
    name = fallback.get("name")
    if name and name == backend.get("name"):
        return [
            errors.Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": the fallback must be another PlntBackend than '
                "spec.backend.name",
                "spec.fallback.name",
            )
        ]
    return []


def slo_causes(slo: Any) -> list[errors.Cause]:
    """Objectives that could never be judged, or never all be met, are refused at admission.

    An empty `spec.slo` states nothing to hold the canary to; a time to first token
    larger than the end-to-end latency at the same or a higher percentile can never be
    met together with it (the first token is part of the call).
    """
    if not isinstance(slo, dict):
        return []
    if not any(slo.get(name) is not None for name in OBJECTIVE_FIELDS):
        return [
            errors.Cause(
                "FieldValueRequired",
                "Required value: spec.slo must state at least one objective of "
                + ", ".join(OBJECTIVE_FIELDS),
                "spec.slo",
            )
        ]
    first, whole = slo.get("timeToFirstToken"), slo.get("latency")
    if isinstance(first, dict) and isinstance(whole, dict):
        first_ms, whole_ms = first.get("milliseconds"), whole.get("milliseconds")
        first_p, whole_p = first.get("percentile", 95.0), whole.get("percentile", 95.0)
        if (
            isinstance(first_ms, int | float)
            and isinstance(whole_ms, int | float)
            and isinstance(first_p, int | float)
            and isinstance(whole_p, int | float)
            and first_ms > whole_ms
            and first_p >= whole_p
        ):
            return [
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {first_ms}: the first token cannot take longer than the "
                    f"whole call (spec.slo.latency.milliseconds is {whole_ms} at p{whole_p})",
                    "spec.slo.timeToFirstToken.milliseconds",
                )
            ]
    return []


def _reference_causes(obj: Object) -> list[errors.Cause]:
    """A reference the pull could never resolve is refused at admission, not in the saga:
    the workflow spec's, and the evaluation dataset's (pulled by the same code)."""
    return _pinned_causes(lookup(obj, "spec", "workflow") or {}, "spec.workflow") + _pinned_causes(
        lookup(obj, "spec", "canary", "evaluation", "dataset") or {},
        "spec.canary.evaluation.dataset",
    )


def _pinned_causes(pinned: Any, field: str) -> list[errors.Cause]:
    """The causes of one `{ref, digest}` at `field`."""
    if not isinstance(pinned, dict):
        return []
    ref, digest = pinned.get("ref"), pinned.get("digest")
    if not isinstance(ref, str) or not ref:
        return []  # the schema reports a missing or mistyped ref
    try:
        parsed = references.parse(ref)
    except spec_errors.InvalidReference as error:
        return [
            errors.Cause(
                "FieldValueInvalid", f"Invalid value: {go_quote(ref)}: {error}", f"{field}.ref"
            )
        ]
    if parsed.digest is not None and isinstance(digest, str) and parsed.digest != digest:
        return [
            errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {go_quote(ref)}: pinned to {parsed.digest}, "
                f"but {field}.digest is {digest}",
                f"{field}.ref",
            )
        ]
    return []


def mark_reconciling(obj: Object, reason: str, message: str) -> None:
    """Say in `obj`'s status that its generation awaits the saga (see the module docstring).

    A Reconciling condition that was already true keeps its transition time; Stalled,
    which spoke of an older generation, goes.
    """
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    kept: list[Any] = []
    since = now_rfc3339()
    for condition in status.get("conditions") or []:
        kind = condition.get("type") if isinstance(condition, dict) else None
        if kind == RECONCILING and condition.get("status") == "True":
            since = condition.get("lastTransitionTime") or since
        if kind not in (RECONCILING, STALLED):
            kept.append(condition)
    kept.append(
        {
            "type": RECONCILING,
            "status": "True",
            "observedGeneration": lookup(obj, "metadata", "generation"),
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }
    )
    status["conditions"] = kept
