"""Invocation's rules beyond its schema: a valid revision selector, bounded inputs, an
immutable spec, and the status a new Invocation starts with.

The spec is immutable after create, as a Job's template is: an Invocation records one
call, and the workflow running it read the spec when it started, so a changed spec would
describe a call that never happened. Labels and annotations may change.

A new Invocation starts `Pending`, with kstatus's `Reconciling=True`, so a client reading
it right after its create (`kubectl wait`, a GitOps tool) sees it in progress; the
invocation's workflow replaces the status as it runs (`plnt.sagas.invoking.activities`).
"""

from __future__ import annotations

import copy
from typing import Any

import pydantic

from plnt.api import errors
from plnt.api.invocations import (
    MAX_INPUT_BYTES,
    RECONCILING,
    InvocationSpec,
    input_bytes,
    revision_problem,
)
from plnt.api.meta import now_rfc3339
from plnt.registry.fieldcauses import go_value
from plnt.registry.objects import Object, lookup
from plnt.registry.strategy import Strategy

IMMUTABLE = "field is immutable"


def _normalized(spec: Any) -> dict[str, Any] | None:
    """The spec with its defaults applied, as it is stored (None when it does not parse)."""
    if not isinstance(spec, dict):
        return None
    try:
        return InvocationSpec.model_validate(spec).to_wire()
    except pydantic.ValidationError:
        return None


class InvocationStrategy(Strategy):
    """Defaulting and rules of Invocation beyond its schema."""

    def prepare_for_create(self, obj: Object) -> None:
        super().prepare_for_create(obj)
        obj["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": RECONCILING,
                    "status": "True",
                    "lastTransitionTime": now_rfc3339(),
                    "reason": "Pending",
                    "message": "waiting for the invocation's workflow to start the call",
                }
            ],
        }

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        """A spec that equals the stored one once defaulted (a PUT of the manifest as first
        written) is the stored one: no new generation, nothing for immutability to refuse."""
        spec = _normalized(obj.get("spec"))
        if spec is not None and spec == _normalized(old.get("spec")):
            obj["spec"] = copy.deepcopy(old["spec"])
        super().prepare_for_update(obj, old)

    def validate_semantics(self, obj: Object) -> list[errors.Cause]:
        causes: list[errors.Cause] = []
        revision = lookup(obj, "spec", "revision")
        if revision is not None and (problem := revision_problem(revision)) is not None:
            causes.append(
                errors.Cause(
                    "FieldValueNotSupported",
                    f"Unsupported value: {go_value(revision)}: {problem}",
                    "spec.revision",
                )
            )
        inputs = lookup(obj, "spec", "inputs")
        if isinstance(inputs, dict) and (size := input_bytes(inputs)) > MAX_INPUT_BYTES:
            causes.append(
                errors.Cause(
                    "FieldValueTooLong",
                    f"Too long: may not be more than {MAX_INPUT_BYTES} bytes (is {size} bytes"
                    " as JSON)",
                    "spec.inputs",
                )
            )
        return causes

    def validate_transition(self, obj: Object, old: Object) -> list[errors.Cause]:
        """Every spec field that changed is refused, named with its new value."""
        new_spec, old_spec = _normalized(obj.get("spec")), _normalized(old.get("spec"))
        if new_spec is None or old_spec is None or new_spec == old_spec:
            return []
        return [
            errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {go_value(new_spec.get(key))}: {IMMUTABLE}",
                f"spec.{key}",
            )
            for key in sorted(set(new_spec) | set(old_spec))
            if new_spec.get(key) != old_spec.get(key)
        ]
