"""How a resource changes: the hooks every write runs, in one fixed order.

Order (see `plnt.registry.store`): prepare → validate → warn → canonicalise.
Strategies only supply the hooks. The main strategy keeps the old status and
bumps `generation` only when something outside metadata and status changes; the
status strategy keeps everything but status.
"""

from __future__ import annotations

import copy

import pydantic

from plnt.api.errors import Cause
from plnt.registry import fieldcauses, labelnames
from plnt.registry.definitions import Object

_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp")


def _spec_part(obj: Object) -> Object:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class Strategy:
    """Default Kubernetes behaviour for a resource with a status subresource."""

    def __init__(self, *, model: type[pydantic.BaseModel], has_status: bool = True) -> None:
        self.model = model
        self.has_status = has_status
        self._validated: tuple[Object, pydantic.BaseModel] | None = None

    # --- prepare ---------------------------------------------------------------

    def prepare_for_create(self, obj: Object) -> None:
        """Drop client-set server fields and, with a status subresource, the status."""
        meta = obj.setdefault("metadata", {})
        for name in (*_SERVER_SET, "managedFields"):
            meta.pop(name, None)
        meta["generation"] = 1
        if self.has_status:
            obj.pop("status", None)

    def prepare_for_update(self, obj: Object, old: Object) -> None:
        """Keep the old status; bump generation when the spec part changed."""
        if self.has_status:
            if "status" in old:
                obj["status"] = copy.deepcopy(old["status"])
            else:
                obj.pop("status", None)
        meta = obj.setdefault("metadata", {})
        old_meta = old.get("metadata", {})
        for name in _SERVER_SET:
            if name in old_meta and name != "resourceVersion":
                meta[name] = old_meta[name]
            elif name != "resourceVersion":
                meta.pop(name, None)
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

    def validate(self, obj: Object) -> list[Cause]:
        """Schema validation through the model plus the kind's own rules; every error."""
        causes = validate_metadata(obj)
        self._validated = None
        try:
            self._validated = (obj, self.model.model_validate(obj))
        except pydantic.ValidationError as error:
            causes.extend(
                Cause(reason=c.reason, message=c.message, field=c.field)
                for c in fieldcauses.validation_causes(error)
                if not c.field.startswith("metadata.")
            )
        causes.extend(self.validate_semantics(obj))
        return causes

    def validate_update(self, obj: Object, old: Object) -> list[Cause]:
        """Validation of an update: the object's rules plus immutability rules."""
        return self.validate(obj) + self.validate_transition(obj, old)

    def validate_semantics(self, obj: Object) -> list[Cause]:
        """Kind-specific rules the schema cannot express; override per kind."""
        del obj
        return []

    def validate_transition(self, obj: Object, old: Object) -> list[Cause]:
        """Rules about how an object may change; override per kind."""
        del obj, old
        return []

    def warnings(self, obj: Object) -> list[str]:
        """Non-fatal advice returned as `Warning:` headers; override per kind."""
        del obj
        return []

    def canonicalize(self, obj: Object) -> None:
        """Apply schema defaults and drop explicit nulls, as defaulting does for CRDs.

        Runs after validation passed, so the model accepts the object; metadata is
        left exactly as sent.
        """
        # The model `validate` just built for this very object, if any (writes run
        # validate then canonicalize with nothing in between): one pydantic pass, not two.
        memo, self._validated = self._validated, None
        model = memo[1] if memo is not None and memo[0] is obj else self.model.model_validate(obj)
        wire = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        for key in list(obj):
            if key not in ("metadata", "apiVersion", "kind") and key not in wire:
                del obj[key]
        for key, value in wire.items():
            if key not in ("metadata", "apiVersion", "kind"):
                obj[key] = value


def validate_metadata(obj: Object) -> list[Cause]:
    """Name, labels and annotations rules shared by every kind."""
    causes: list[Cause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Cause("FieldValueRequired", "Required value", "metadata")]
    name = meta.get("name")
    if not name:
        causes.append(
            Cause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        )
    elif not isinstance(name, str) or not labelnames.is_dns1123_subdomain(name):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
                "metadata.name",
            )
        )
    for section in ("labels", "annotations"):
        value = meta.get(section)
        if value is not None and (
            not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
        ):
            causes.append(
                Cause(
                    "FieldValueTypeInvalid",
                    "Invalid value: must be a map of strings",
                    f"metadata.{section}",
                )
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None and not (
        isinstance(finalizers, list) and all(isinstance(f, str) for f in finalizers)
    ):
        causes.append(
            Cause(
                "FieldValueTypeInvalid",
                "Invalid value: must be a list of strings",
                "metadata.finalizers",
            )
        )
    return causes
