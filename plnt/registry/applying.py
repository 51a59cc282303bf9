"""Server-side apply: merge an applied configuration into the live object and own its fields.

`kubectl apply --server-side` sends the whole intended object; the server
decides the result from field ownership (see `plnt.registry.managedfields`),
the way kube's structured-merge-diff does for a custom resource whose lists
are all atomic:

1. The applier's new field set is the set of the configuration: every scalar
   and list it names, every key of a free-form map (labels, annotations,
   `dict[str, Any]`), every empty object or null it names. Status (on the main
   resource) is never applied.
2. The configuration is merged into the live object: objects field by field,
   everything else replaced; a null removes the field.
3. Fields the applier owned through its previous apply and no longer names are
   removed, unless another manager (or this configuration) still owns them or
   something below them.
4. A field the result changes that another manager owns is a conflict: 409
   with one `FieldManagerConflict` cause per field, unless `force` is set, in
   which case the applier takes the field over.
5. kube's two conveniences for manager `kubectl` are kept: conflicts only with
   fields that still hold the values of the client-side
   `last-applied-configuration` annotation are forced (the first server-side
   apply after client-side ones), and that annotation, when present, is kept
   in step with the applied configuration.

Unknown fields in a configuration are always refused (400), whatever
`fieldValidation` says: kube's typed conversion of the patch refuses them.
Duplicate fields follow `fieldValidation`.

No I/O here. Errors are API errors (`plnt.api.errors`): BadRequest for a
configuration that is not an object of this kind, Conflict for ownership
conflicts.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from plnt.api import errors
from plnt.registry import fieldvalidation
from plnt.registry.managedfields import (
    APPLY,
    EMPTY,
    Entry,
    FieldSet,
    Path,
    compare,
    content,
    path_string,
    same_value,
    strip,
    with_parents,
    without_prefixes,
)
from plnt.registry.objects import Object

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
KUBECTL = "kubectl"

# --- the schema, as far as field sets need it ------------------------------------------------


@functools.cache
def _declared(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """Field annotations of a model by wire name (alias)."""
    table: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        table[alias or name] = info.annotation
    return table


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated; of a union of models keep the first model."""
    while True:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            annotation = args[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in args if a is not type(None)]
            models = [a for a in members if _is_model(a)]
            annotation = models[0] if models else (members[0] if len(members) == 1 else Any)
        else:
            return annotation


def _collect(annotation: Any, value: Any, path: Path, out: set[Path]) -> None:
    annotation = _unwrap(annotation)
    if isinstance(value, dict):
        if _is_model(annotation):
            table = _declared(annotation)
            for key, item in value.items():
                child = (*path, f"f:{key}")
                if key in table:
                    _collect(table[key], item, child, out)
                    if item is None or item == {}:
                        out.add(child)
                else:
                    _collect(Any, item, child, out)
                    out.add(child)
            return
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if annotation is Any or (origin in (dict, Mapping) and len(args) == 2):
            element = args[1] if args else Any
            for key, item in value.items():
                child = (*path, f"f:{key}")
                _collect(element, item, child, out)
                out.add(child)
            return
    if path:
        out.add(path)


def field_set(model: type[pydantic.BaseModel], obj: Mapping[str, Any]) -> FieldSet:
    """The fields a configuration sets (kube's ToFieldSet) under `model`."""
    out: set[Path] = set()
    _collect(model, dict(obj), (), out)
    return frozenset(out)


# --- merging and pruning -------------------------------------------------------------------


def merge(live: Mapping[str, Any], config: Mapping[str, Any]) -> Object:
    """`config` laid over `live`: objects merge per field, anything else is replaced."""
    out: Object = dict(live)
    for key, value in config.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def remove_paths(obj: Object, paths: FieldSet) -> Object:
    """A copy of `obj` without the fields at `paths` (a removed field takes its subtree)."""
    doomed = {p for p in paths if p and all(e.startswith("f:") for e in p)}

    def walk(node: Any, path: Path) -> Any:
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            child = (*path, f"f:{key}")
            if child in doomed:
                continue
            out[key] = walk(value, child)
        return out

    result: Object = walk(obj, ())
    return result


# --- conflicts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conflict:
    """A field the applier would change that `owner` manages."""

    owner: Entry
    path: Path


def conflict_error(conflicts: Sequence[Conflict]) -> errors.Conflict:
    """kube's apply conflict: one message listing every field, one cause per field."""
    causes = [
        errors.Cause(
            "FieldManagerConflict", f"conflict with {c.owner.describe()}", path_string(c.path)
        )
        for c in conflicts
    ]
    if len(conflicts) == 1:
        only = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {only.owner.describe()}: "
            f"{path_string(only.path)}"
        )
        return errors.Conflict(message, causes=causes)
    by_owner: dict[str, list[Conflict]] = {}
    for c in conflicts:
        by_owner.setdefault(c.owner.describe(), []).append(c)
    lines: list[str] = []
    for owner in sorted(by_owner):
        lines.append(f"conflicts with {owner}:")
        lines.extend(f"- {path_string(c.path)}" for c in by_owner[owner])
    message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, causes=causes)


def _last_applied_allowance(
    live: Object, model: type[pydantic.BaseModel], api_version: str
) -> FieldSet:
    """Fields whose live values still equal the client-side last-applied configuration."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return EMPTY
    try:
        last = json.loads(text)
    except ValueError:
        return EMPTY
    if not isinstance(last, dict) or last.get("apiVersion") != api_version:
        return EMPTY
    diff = compare(last, content(live))
    return field_set(model, last) - diff.modified - diff.added - diff.removed


def _with_last_applied(result: Object, config: Mapping[str, Any]) -> None:
    meta = result.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("annotations") or {}).get(LAST_APPLIED):
        return
    annotations = meta["annotations"] = dict(meta["annotations"])
    recorded = json.loads(json.dumps(config))
    sent = recorded.get("metadata")
    if isinstance(sent, dict) and isinstance(sent.get("annotations"), dict):
        sent["annotations"].pop(LAST_APPLIED, None)
        if not sent["annotations"]:
            del sent["annotations"]
    annotations[LAST_APPLIED] = json.dumps(recorded, separators=(",", ":"), sort_keys=True) + "\n"


# --- apply ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    """The merged object (without managedFields) and the entries after the apply."""

    object: Object
    entries: list[Entry]


def apply(
    live: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    entries: Sequence[Entry],
    manager: str,
    api_version: str,
    model: type[pydantic.BaseModel],
    now: str,
    force: bool = False,
    subresource: str = "",
    ignored: FieldSet = EMPTY,
) -> Applied:
    """Apply `config` as `manager` to `live` (an empty object when creating).

    Raises `errors.Conflict` (with FieldManagerConflict causes) when the result
    changes fields other managers own and `force` is not set.
    """
    current = content(live)
    applied = without_prefixes(field_set(model, config), ignored)
    mine = Entry(manager, APPLY, api_version, strip(applied), now, subresource)
    previous = next((e for e in entries if e.identity == mine.identity), None)
    others = [e for e in entries if e.identity != mine.identity]
    merged = merge(current, config)
    if previous is not None and previous.fields:
        owned = with_parents(applied.union(*(e.fields for e in others)))
        merged = remove_paths(merged, with_parents(previous.fields) - owned)
    diff = compare(current, merged).excluding(ignored)
    changed = diff.changed
    conflicts = [
        Conflict(entry, path) for entry in others for path in sorted(entry.fields & changed)
    ]
    if conflicts and not force:
        allowed = (
            _last_applied_allowance(dict(live), model, api_version) if manager == KUBECTL else EMPTY
        )
        remaining = [c for c in conflicts if c.path not in allowed]
        if remaining:
            raise conflict_error(remaining)
    out: list[Entry] = []
    for entry in others:
        kept = entry.fields - changed - diff.removed
        if kept:
            out.append(entry if kept == entry.fields else _with_fields(entry, kept))
    unchanged = same_value(merged, current)
    if unchanged and previous is not None:
        mine = Entry(manager, APPLY, api_version, mine.fields, previous.time, subresource)
    if mine.fields:
        out.append(mine)
    if manager == KUBECTL:
        _with_last_applied(merged, config)
    return Applied(merged, out)


def _with_fields(entry: Entry, fields: FieldSet) -> Entry:
    return Entry(
        entry.manager, entry.operation, entry.api_version, fields, entry.time, entry.subresource
    )


# --- the configuration itself ------------------------------------------------------------------


def check_configuration(
    config: Any,
    *,
    api_version: str,
    kind: str,
    model: type[pydantic.BaseModel],
    namespace: str | None,
    name: str,
    field_validation: str,
    duplicates: Sequence[str] = (),
) -> tuple[Object, list[str]]:
    """The configuration with its identity filled in, and warnings; 400 when it is unusable."""
    if not isinstance(config, dict):
        raise errors.BadRequest("the apply configuration must be an object")
    sent_version = config.get("apiVersion")
    if not sent_version or not config.get("kind"):
        raise errors.BadRequest(
            "the apply configuration must set apiVersion and kind "
            f"(apiVersion: {api_version}, kind: {kind})"
        )
    if sent_version != api_version:
        raise errors.BadRequest(
            "Incorrect version specified in apply patch. Specified patch version: "
            f"{sent_version}, expected: {api_version}"
        )
    if config["kind"] != kind:
        raise errors.BadRequest(
            f"the kind in the data ({config['kind']}) does not match the expected kind ({kind})"
        )
    meta = config.get("metadata")
    if meta is None:
        meta = config["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.BadRequest("metadata must be an object")
    if meta.get("managedFields") is not None:
        raise errors.BadRequest("metadata.managedFields must be nil")
    if meta.get("name") and meta["name"] != name:
        raise errors.BadRequest(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
        )
    if namespace is not None and meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["name"] = name
    if namespace is not None:
        meta["namespace"] = namespace
    unknown = fieldvalidation.unknown_fields(model, config)
    if unknown:
        where = f"{namespace or ''}/{name}; {api_version}, Kind={kind}"
        listed = [f".{path}: field not declared in schema" for path in unknown]
        detail = listed[0] if len(listed) == 1 else "errors:\n  " + "\n  ".join(listed)
        raise errors.BadRequest(f"failed to create typed patch object ({where}): {detail}")
    warnings: list[str] = []
    if duplicates:
        if field_validation == "Strict":
            raise errors.BadRequest(
                "error strict decoding YAML: "
                + fieldvalidation.strict_decoding_error((), list(duplicates)).removeprefix(
                    "strict decoding error: "
                )
            )
        if field_validation == "Warn":
            warnings = fieldvalidation.strict_warnings((), list(duplicates))
    return config, warnings
