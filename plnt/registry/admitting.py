"""The hooks every write runs before storage, in their one order: `before_create`, `before_update`.

Create, update (PUT, PATCH and every subresource) and server-side apply (which creates
or updates through the same two) all run:

1. identity: apiVersion, kind, namespace and name must agree with the URL (400), and
   metadata must decode as kube's ObjectMeta (a wrong JSON type: 400, or 422 naming
   `patch` for a patch's result; see `metadecoding`);
2. on update, the resourceVersion precondition (409 when the body's is stale);
3. field validation (`fieldValidation`: Strict fails, Warn warns, Ignore drops unknown
   and duplicate fields);
4. the strategy's prepare (server fields cleared on create, with a new uid,
   creationTimestamp and generated name; status or spec kept on update);
5. validation (ObjectMeta's rules, the structural schema and the kind's rules, every
   error at once: 422), warnings and canonicalisation, the schema's defaults taken
   from the same pydantic pass that validated (`Strategy.check`);
6. managedFields (`plnt.registry.managedfields`), unless server-side apply set them.

Pure functions of a definition and objects, no storage: the store runs its admission
hooks and storage after these (`plnt.registry.hooks`). Nothing a client sends gets past
here as anything but an API error: a validation failure is never a 500.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Any

import pydantic

from plnt.api import errors
from plnt.api.meta import now_rfc3339
from plnt.registry import (
    fieldcauses,
    fieldvalidation,
    managedfields,
    metadecoding,
    metavalidation,
)
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import WriteOptions
from plnt.registry.storedobjects import parse_resource_version

_GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def before_create(
    definition: ResourceDefinition,
    obj: Object,
    *,
    namespace: str,
    options: WriteOptions,
    applied: Sequence[managedfields.Entry] | None = None,
) -> tuple[Object, list[str]]:
    """A create's hooks in order (see the module doc); the object to store and its warnings.

    `obj` is changed in place (field validation may return another dict: use the one
    returned). `applied` are the managedFields of a create by server-side apply.
    """
    check_identity(definition, obj, namespace=namespace, name=None, is_patch=options.is_patch)
    obj, warnings = field_validation(definition, obj, options)
    meta = obj["metadata"]
    generating = generates_name(obj)
    sent_managed = meta.get("managedFields")
    definition.strategy.prepare_for_create(obj)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    if generating:
        meta["name"] = generated_name(meta["generateName"])
    warnings += validate(definition, obj, None)
    if applied is not None:
        managedfields.store_entries(obj, applied)
    else:
        _record_managed_fields(definition, obj, {}, sent_managed, options, subresource="")
    return obj, warnings


def before_update(
    definition: ResourceDefinition,
    new: Object,
    old: Object,
    *,
    namespace: str,
    name: str,
    options: WriteOptions,
    subresource: str = "",
    applying_write: bool = False,
) -> tuple[Object, list[str]]:
    """An update's hooks in order (see the module doc); the object to store and its warnings.

    `new` is the requested object (a PUT body, a patch applied to `old`), changed in
    place; `old` the stored one. `applying_write`: server-side apply already set `new`'s
    managedFields.
    """
    if not isinstance(new, dict):
        raise errors.BadRequest("the request body must be a JSON object")
    check_identity(definition, new, namespace=namespace, name=name, is_patch=options.is_patch)
    wanted_rv = new["metadata"].get("resourceVersion")
    if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
        parse_resource_version(str(wanted_rv), field_name="metadata.resourceVersion")
        raise errors.Conflict.of(definition.group_resource, name, errors.OPTIMISTIC_LOCK_MESSAGE)
    # No resourceVersion: an unconditional update of the stored revision, as kube
    # sets it before validating (so "must be specified for an update" never applies).
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
    new, warnings = field_validation(definition, new, options)
    sent_managed = new["metadata"].get("managedFields")
    if subresource == "status":
        definition.strategy.prepare_for_status_update(new, old)
    else:
        definition.strategy.prepare_for_update(new, old)
    warnings += validate(definition, new, old)
    if not applying_write:
        _record_managed_fields(definition, new, old, sent_managed, options, subresource=subresource)
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
    return new, warnings


def generates_name(obj: Object) -> bool:
    """The object is to be named from its `generateName` (it sends no name)."""
    meta = obj.get("metadata")
    return isinstance(meta, dict) and not meta.get("name") and bool(meta.get("generateName"))


def generated_name(prefix: str) -> str:
    """`prefix` and five random characters, as kube's SimpleNameGenerator makes them.

    From `random`'s module generator, as kube's from math/rand: a generated name needs to
    be unlikely to collide (a collision is retried), not unpredictable, and reading the
    system's entropy for each character cost more than the rest of the name. The module
    generator is reseeded in a forked child, so sibling processes do not share names.
    """
    return prefix + "".join(random.choices(_GENERATE_NAME_ALPHABET, k=5))


def _record_managed_fields(
    definition: ResourceDefinition,
    new: Object,
    old: Object,
    sent: Any,
    options: WriteOptions,
    *,
    subresource: str,
) -> None:
    """Set `new`'s managedFields after a create/update/patch by `options.field_manager`."""
    base = managedfields.base_entries(sent, old or None, subresource=subresource)
    entries = managedfields.record_update(
        base,
        old,
        new,
        manager=options.field_manager,
        api_version=definition.api_version,
        now=now_rfc3339(),
        subresource=subresource,
        ignored=managedfields.ignored_fields(
            old, new, subresource=subresource, has_status=definition.strategy.has_status
        ),
    )
    managedfields.store_entries(new, entries)


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
    else:
        causes = metavalidation.validate_update(
            meta, old.get("metadata", {}), namespaced=definition.namespaced
        )
    checked = strategy.check(obj, old)  # the causes and the canonical body, one pass
    causes += checked.causes
    if causes:
        raise errors.Invalid.of(definition.qualified_kind, name, _unique(causes))
    old_meta = old.get("metadata", {}) if old is not None else None
    warnings = metavalidation.finalizer_warnings(meta, old_meta) + strategy.warnings(obj)
    try:
        strategy.canonicalize(obj, checked.canonical)
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
