"""WorkflowRun's rules beyond its schema: the teardown finalizer, backend and reference checks.

Admission refuses here what the deploy saga could never carry out (a reference the pull
cannot resolve, a backend named twice), so such mistakes are a 422 on the write instead
of a failed deploy later.
"""

from __future__ import annotations

from plnt.api import errors
from plnt.api.workflowruns import TEARDOWN_FINALIZER, WorkflowRun
from plnt.registry.definitions import Object, lookup
from plnt.registry.labelnames import go_quote
from plnt.registry.strategy import Strategy
from plnt.workflowspec import errors as spec_errors
from plnt.workflowspec import references


class WorkflowRunStrategy(Strategy):
    """Defaulting and rules of WorkflowRun beyond its schema.

    `teardown_finalizer`: add `TEARDOWN_FINALIZER` to every new run (only a server with
    sagas may, since only the saga removes it).
    """

    def __init__(self, *, model: type[WorkflowRun], teardown_finalizer: bool = False) -> None:
        super().__init__(model=model)
        self.teardown_finalizer = teardown_finalizer

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
        causes.extend(_reference_causes(obj))
        return causes

    def warnings(self, obj: Object) -> list[str]:
        if lookup(obj, "spec", "target") == "kubernetes":
            return [
                "spec.target: kubernetes runners need plnt installed in a cluster; "
                "standalone plnt runs local runners only"
            ]
        return []


def _reference_causes(obj: Object) -> list[errors.Cause]:
    """A reference the pull could never resolve is refused at admission, not in the saga."""
    ref = lookup(obj, "spec", "workflow", "ref")
    digest = lookup(obj, "spec", "workflow", "digest")
    if not isinstance(ref, str) or not ref:
        return []  # the schema reports a missing or mistyped ref
    try:
        parsed = references.parse(ref)
    except spec_errors.InvalidReference as error:
        return [
            errors.Cause(
                "FieldValueInvalid", f"Invalid value: {go_quote(ref)}: {error}", "spec.workflow.ref"
            )
        ]
    if parsed.digest is not None and isinstance(digest, str) and parsed.digest != digest:
        return [
            errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {go_quote(ref)}: pinned to {parsed.digest}, "
                f"but spec.workflow.digest is {digest}",
                "spec.workflow.ref",
            )
        ]
    return []
