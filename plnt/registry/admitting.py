"""The checks every write makes before storage, in the order the store runs them.

Identity (apiVersion, kind, namespace and name must agree with the URL: 400) and
metadata that decodes as kube's ObjectMeta (a wrong JSON type: 400, or 422 naming
`patch` for a patch's result; see `metadecoding`), field validation (`fieldValidation`:
Strict fails, Warn warns, Ignore drops unknown and duplicate fields), then validation
(ObjectMeta's rules, the structural schema and the kind's rules, every error at once:
422), warnings and canonicalisation. Pure functions of a definition and an object, no
storage. Nothing a client sends gets past here as anything but an API error: a
validation failure is never a 500.
"""

from __future__ import annotations

import pydantic

from plnt.api import errors
from plnt.registry import fieldcauses, fieldvalidation, metadecoding, metavalidation
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import WriteOptions


def check_identity(
    definition: ResourceDefinition,
    obj: Object,
    *,
    namespace: str,
    name: str | None,
    is_patch: bool = False,
) -> None:
    """apiVersion/kind/namespace/name in the body must agree with the URL (400 otherwise).

    Metadata must first decode as kube's ObjectMeta (`metadecoding.decode_error`).
    """
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
    problem = metadecoding.decode_error(obj.get("metadata"), kind=d.kind)
    if problem is not None:
        raise _undecodable(d, obj, problem, is_patch=is_patch)
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
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


def _undecodable(
    definition: ResourceDefinition, obj: Object, problem: str, *, is_patch: bool
) -> errors.APIError:
    """kube's answer to metadata it cannot decode: 400 for a body, 422 `patch` for a patch."""
    d = definition
    if not is_patch:
        return errors.BadRequest(
            f'{d.kind} in version "{d.version}" cannot be handled as a {d.kind}: {problem}'
        )
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    name = name if isinstance(name, str) else ""
    cause = errors.Cause("FieldValueInvalid", f'Invalid value: "...": {problem}', "patch")
    return errors.Invalid(
        f'{d.qualified_kind} "{name}" is invalid: patch: {cause.message}',
        name=name,
        group=d.group,
        kind=d.kind,
        causes=[cause],
    )


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
    """Run validation (every error at once → 422) and collect warnings.

    ObjectMeta's rules come first, as kube's custom resource validator runs them
    before the schema: on create with the strategy's name rule, on update with the
    path-segment rule and what may not change.
    """
    strategy = definition.strategy
    meta = obj["metadata"]
    name = meta.get("name")
    name = name if isinstance(name, str) else ""
    if old is None:
        causes = metavalidation.validate_create(
            meta, namespaced=definition.namespaced, name_rule=strategy.name_rule
        )
        causes += strategy.validate(obj)
    else:
        causes = metavalidation.validate_update(
            meta, old.get("metadata", {}), namespaced=definition.namespaced
        )
        causes += strategy.validate_update(obj, old)
    if causes:
        raise errors.Invalid.of(definition.qualified_kind, name, _unique(causes))
    old_meta = old.get("metadata", {}) if old is not None else None
    warnings = metavalidation.finalizer_warnings(meta, old_meta) + strategy.warnings(obj)
    try:
        strategy.canonicalize(obj)
    except pydantic.ValidationError as error:  # a strategy changed what it had validated
        found = [
            errors.Cause(c.reason, c.message, c.field)
            for c in fieldcauses.validation_causes(error, model=definition.model)
        ]
        raise errors.Invalid.of(definition.qualified_kind, name, found) from error
    return warnings


def _unique(causes: list[errors.Cause]) -> list[errors.Cause]:
    """Each cause once (kube's aggregate prints a repeated error once too)."""
    return list(dict.fromkeys(causes))
