"""The checks every write makes before storage, in the order the store runs them.

Identity (apiVersion, kind, namespace and name must agree with the URL: 400), field
validation (`fieldValidation`: Strict fails, Warn warns, Ignore drops unknown and
duplicate fields), then the strategy's validation (every error at once: 422), warnings
and canonicalisation. Pure functions of a definition and an object, no storage.
"""

from __future__ import annotations

from plnt.api import errors
from plnt.registry import fieldvalidation
from plnt.registry.definitions import Object, ResourceDefinition
from plnt.registry.options import WriteOptions


def check_identity(
    definition: ResourceDefinition, obj: Object, *, namespace: str, name: str | None
) -> None:
    """apiVersion/kind/namespace/name in the body must agree with the URL (400 otherwise)."""
    d = definition
    api_version = obj.get("apiVersion")
    if api_version not in (None, "", d.api_version):
        raise errors.BadRequest(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({d.api_version})"
        )
    kind = obj.get("kind")
    if kind not in (None, "", d.kind):
        raise errors.BadRequest(
            f"the kind in the data ({kind}) does not match the expected kind ({d.kind})"
        )
    obj["apiVersion"], obj["kind"] = d.api_version, d.kind
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.BadRequest("metadata must be an object")
    if d.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != namespace:
            raise errors.BadRequest(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        meta["namespace"] = namespace
    if name is not None:
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise errors.BadRequest(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        meta["name"] = name


def field_validation(
    definition: ResourceDefinition, obj: Object, options: WriteOptions
) -> tuple[Object, list[str]]:
    """Apply fieldValidation: Strict fails, Warn warns, Ignore drops unknown fields."""
    unknown = fieldvalidation.unknown_fields(definition.model, obj)
    duplicates = list(options.duplicates)
    if not unknown and not duplicates:
        return obj, []
    if options.field_validation == "Strict":
        text = fieldvalidation.strict_error_message(definition.kind, unknown, duplicates)
        if options.is_patch:
            raise errors.Invalid(
                f'{definition.qualified_kind} "{obj["metadata"].get("name", "")}" is '
                f'invalid: patch: Invalid value: "...": {text}',
                name=str(obj["metadata"].get("name", "")),
                group=definition.group,
                kind=definition.kind,
                causes=[
                    errors.Cause("FieldValueInvalid", f'Invalid value: "...": {text}', "patch")
                ],
            )
        raise errors.BadRequest(
            f'{definition.kind} in version "{definition.version}" cannot be handled '
            f"as a {definition.kind}: {text}"
        )
    warnings: list[str] = []
    if options.field_validation == "Warn":
        warnings = [f'unknown field "{path}"' for path in unknown]
        warnings += [f'duplicate field "{path}"' for path in duplicates]
    return fieldvalidation.drop_unknown_fields(definition.model, obj), warnings


def validate(definition: ResourceDefinition, obj: Object, old: Object | None) -> list[str]:
    """Run validation (every error at once → 422) and collect warnings."""
    strategy = definition.strategy
    causes = strategy.validate(obj) if old is None else strategy.validate_update(obj, old)
    if causes:
        name = str(obj.get("metadata", {}).get("name", ""))
        raise errors.Invalid.of(definition.qualified_kind, name, causes)
    warnings = strategy.warnings(obj)
    strategy.canonicalize(obj)
    return warnings
