"""How a resource changes: the hooks every write runs, in one fixed order.

Order (see `plnt.registry.store`): prepare → validate → warn → canonicalise.
Strategies only supply the hooks. The main strategy keeps the old status and
bumps `generation` only when something outside metadata and status changes; the
status strategy keeps everything but status. An update keeps the metadata kube's
BeforeUpdate keeps (`prepare_update`); the rest of metadata is `metavalidation`'s
(admitting runs its rules before the strategy's), and a strategy only names the rule
for its names (`name_rule`).

Schema validation is a structural schema's, as kube-apiserver validates a custom
resource (plnt serves its kinds the way it serves CRDs: an OpenAPI v3 schema with
defaults, unknown fields per `fieldValidation`): the body without metadata is
validated strictly, so `spec.replicas: true` or `"3"` is refused with a 422
`spec.replicas: Invalid value: "boolean": spec.replicas in body must be of type
integer: "boolean"` instead of being coerced. An integral number (`3.0`) is an
integer, as it is to kube. A Go-typed aggregated server would instead answer a
400 "cannot unmarshal" naming the field only in its text; the CRD behaviour is
the closer one for plnt and names the field as a cause.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from plnt.api.errors import Cause
from plnt.registry import fieldcauses, metavalidation
from plnt.registry.objects import Object

_CLEARED_ON_CREATE = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
)


def _spec_part(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _without_metadata(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k != "metadata"}


def prepare_update(meta: dict[str, Any], old: Mapping[str, Any]) -> None:
    """rest.BeforeUpdate's resets: uid when unset, creationTimestamp, deletion fields once set.

    What an update silently keeps from the stored object; changing the uid is then
    refused by validation, not reverted.
    """
    if not meta.get("uid") and old.get("uid"):
        meta["uid"] = old["uid"]
    if old.get("creationTimestamp"):
        meta["creationTimestamp"] = old["creationTimestamp"]
    if old.get("deletionTimestamp"):
        meta["deletionTimestamp"] = old["deletionTimestamp"]
    if old.get("deletionGracePeriodSeconds") is not None and (
        meta.get("deletionGracePeriodSeconds") is None
    ):
        meta["deletionGracePeriodSeconds"] = old["deletionGracePeriodSeconds"]


def _integral_float(error: Any) -> bool:
    """A strict-mode integer error kube would not raise: 3.0 is an integer to it."""
    value = error.get("input")
    return error.get("type") == "int_type" and isinstance(value, float) and value.is_integer()


def _wire(model: pydantic.BaseModel) -> Object:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass(frozen=True, slots=True)
class Checked:
    """What one validation pass found: the causes, or (none found) the canonical body,
    without metadata: schema defaults applied, nulls dropped, as it is stored."""

    causes: list[Cause]
    canonical: Object | None = None


class Strategy:
    """Default Kubernetes behaviour for a resource with a status subresource."""

    name_rule: metavalidation.NameRule = staticmethod(metavalidation.dns_subdomain_name)
    """How names (and generateName prefixes) are validated on create: a custom resource's."""

    def __init__(self, *, model: type[pydantic.BaseModel], has_status: bool = True) -> None:
        self.model = model
        self.has_status = has_status

    # --- prepare ---------------------------------------------------------------

    def prepare_for_create(self, obj: Object) -> None:
        """Drop client-set server fields and, with a status subresource, the status."""
        meta = obj.setdefault("metadata", {})
        for name in _CLEARED_ON_CREATE:
            meta.pop(name, None)
        meta["generation"] = 1
        if self.has_status:
            obj.pop("status", None)

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        """Keep the old status; bump generation when the spec part changed.

        The rest of metadata follows kube's BeforeUpdate (`prepare_update`):
        a uid that differs from the stored one is left for validation to refuse.
        """
        if self.has_status:
            if "status" in old:
                obj["status"] = copy.deepcopy(old["status"])
            else:
                obj.pop("status", None)
        meta = obj.setdefault("metadata", {})
        old_meta = old.get("metadata", {})
        prepare_update(meta, old_meta)
        generation = int(old_meta.get("generation", 1))
        meta["generation"] = generation + 1 if _spec_part(obj) != _spec_part(old) else generation

    def prepare_for_status_update(self, obj: Object, old: Object) -> None:
        """Only status changes: spec and metadata come from the stored object."""
        status = obj.get("status")
        obj.clear()
        obj.update(copy.deepcopy(old))
        if status is None:
            obj.pop("status", None)
        else:
            obj["status"] = status

    # --- validate ----------------------------------------------------------------

    def check(self, obj: Object, old: Object | None = None) -> Checked:
        """`validate`'s causes (`validate_update`'s, given `old`) and, when there are
        none, the canonical body `canonicalize` stores: one pydantic pass for both."""
        checked = self.check_schema(obj)
        causes = checked.causes
        causes.extend(self.validate_semantics(obj))
        if old is not None:
            causes.extend(self.validate_transition(obj, old))
        return Checked(causes, None if causes else checked.canonical)

    def validate(self, obj: Object) -> list[Cause]:
        """The structural schema (strictly typed, metadata aside) and the kind's own rules."""
        return self.check(obj).causes

    def check_schema(self, obj: Object) -> Checked:
        """Every schema error of the body without metadata, as a custom resource's are
        told; without errors, the body with the schema's defaults and without nulls.

        The canonical body comes from the very model validation built (its dump), so a
        write validates its body once, not once to judge it and again to default it.
        """
        body = _without_metadata(obj)
        try:
            model = self.model.model_validate(body, strict=True)
        except pydantic.ValidationError as error:
            kept = [e for e in error.errors(include_url=False) if not _integral_float(e)]
            if kept:
                return Checked(
                    [
                        Cause(reason=c.reason, message=c.message, field=c.field)
                        for c in fieldcauses.error_causes(kept, model=self.model)
                    ]
                )
            model = self.model.model_validate(body)  # only integral floats: read as integers
        return Checked([], _wire(model))

    def schema_causes(self, obj: Object) -> list[Cause]:
        """Every schema error of the body without metadata (see `check_schema`)."""
        return self.check_schema(obj).causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        """Validation of an update: the object's rules plus immutability rules."""
        return self.check(obj, old).causes

    def validate_semantics(self, obj: Object) -> list[Cause]:
        """Kind-specific rules the schema cannot express; override per kind."""
        del obj
        return []

    def validate_transition(self, obj: Object, old: Object) -> list[Cause]:
        """Rules about how an object may change; override per kind."""
        del obj, old
        return []

    def deletion_held(self, obj: Object) -> bool:
        """Whether an object marked for deletion must stay: by default while
        `metadata.finalizers` remain. A kind with finalizers of its own (a namespace's
        `spec.finalizers`) says so here, as kube's `ShouldDeleteDuringUpdate` does."""
        return bool(obj["metadata"].get("finalizers"))

    def warnings(self, obj: Object) -> list[str]:
        """Non-fatal advice returned as `Warning:` headers; override per kind."""
        del obj
        return []

    def canonicalize(self, obj: Object, canonical: Object | None = None) -> None:
        """Apply schema defaults and drop explicit nulls, as defaulting does for CRDs.

        `canonical` is the body `check` made of this very object; without it the
        schema is applied here. Metadata is left exactly as sent, and keys already in
        `obj` keep their place. Should the model not accept the object (a strategy
        changed it after validating it), pydantic's error is raised for `admitting` to
        answer 422.
        """
        wire = (
            canonical
            if canonical is not None
            else _wire(self.model.model_validate(_without_metadata(obj)))
        )
        for key in list(obj):
            if key not in ("metadata", "apiVersion", "kind") and key not in wire:
                del obj[key]
        for key, value in wire.items():
            if key not in ("metadata", "apiVersion", "kind"):
                obj[key] = value
