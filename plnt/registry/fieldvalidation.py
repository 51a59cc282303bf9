"""Unknown fields and strictness: what `fieldValidation` Strict, Warn and Ignore act on.

pydantic would accept snake_case names (`populate_by_name`), so unknown fields
are found by walking the wire models by their camelCase aliases only, with
paths like kube's strict decoding errors ("spec.canary.smoke.bar",
"status.history[0].x"). The texts of strict errors and of `Warning:` headers
are kube's own, because kubectl users recognise them.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

MAX_STRICT_ERRORS = 100  # kube stops collecting strict errors after this many


def join_path(path: str, key: str) -> str:
    """`spec` + `replicas` → `spec.replicas` (the root has no leading dot)."""
    return f"{path}.{key}" if path else key


# --- unknown fields ---------------------------------------------------------------------

_Visit = Callable[[str], None]


@functools.cache
def wire_fields(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """Field annotations by the exact name clients must send (the alias); computed once."""
    table: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        table[alias or name] = info.annotation
    return table


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


@dataclass(frozen=True)
class _Plan:
    """How to walk one annotation, worked out once (typing introspection is slow)."""

    kind: str  # pass | model | list | tuple | dict | union
    model: type[pydantic.BaseModel] | None = None
    items: tuple[Any, ...] = ()


@functools.cache
def _plan(annotation: Any) -> _Plan:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _plan(args[0])
    if origin in (typing.Union, types.UnionType):
        members = tuple(arg for arg in args if arg is not type(None))
        if len(members) == 1:
            return _plan(members[0])
        models = tuple(arg for arg in members if is_model(arg))
        return _Plan("union", items=models) if models else _Plan("pass")
    if is_model(annotation):
        return _Plan("model", model=annotation)
    if origin in (list, set, frozenset, Sequence, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return _Plan("tuple", items=args)
        return _Plan("list", items=(args[0] if args else Any,))
    if origin in (dict, Mapping) and len(args) == 2:
        return _Plan("dict", items=(args[1],))
    return _Plan("pass")


def _walk(annotation: Any, data: Any, path: str, unknown: _Visit | None) -> Any:
    """Return `data` without undeclared fields, calling `unknown(path)` for each one."""
    plan = _plan(annotation)
    kind = plan.kind
    if kind == "pass":
        return data
    if kind == "model":
        assert plan.model is not None
        return _walk_model(plan.model, data, path, unknown)
    if kind == "union":
        if not isinstance(data, dict):
            return data
        # Several models could fit: judge by the one that declares the most of `data`.
        best = min(plan.items, key=lambda model: len(unknown_fields(model, data)))
        return _walk(best, data, path, unknown)
    if kind == "dict":
        if not isinstance(data, dict):
            return data
        value_type = plan.items[0]
        return {
            key: _walk(value_type, item, join_path(path, key), unknown)
            for key, item in data.items()
        }
    if not isinstance(data, list):
        return data
    if kind == "tuple":
        items = plan.items
        return [
            _walk(items[i], item, f"{path}[{i}]", unknown) if i < len(items) else item
            for i, item in enumerate(data)
        ]
    item_type = plan.items[0]
    return [_walk(item_type, item, f"{path}[{i}]", unknown) for i, item in enumerate(data)]


def _walk_model(
    model: type[pydantic.BaseModel], data: Any, path: str, unknown: _Visit | None
) -> Any:
    if not isinstance(data, dict):
        return data  # a type error, which validation reports
    table = wire_fields(model)
    keep_extra = _keeps_extra(model)
    kept: dict[str, Any] = {}
    for key, item in data.items():
        if key in table:
            kept[key] = _walk(table[key], item, join_path(path, key), unknown)
        elif keep_extra:
            kept[key] = item
        elif unknown is not None:
            unknown(join_path(path, key))
    return kept


@functools.cache
def _keeps_extra(model: type[pydantic.BaseModel]) -> bool:
    return model.model_config.get("extra") == "allow"


_UNDECLARED = object()


def _clean(annotation: Any, data: Any) -> bool:
    """`data` has no undeclared field: `_walk` would report none and keep all of it.

    The common answer, found without building the paths and copies of `_walk`
    (a body with an unknown field is walked again, by `_walk`, for its paths).
    """
    plan = _plan(annotation)
    kind = plan.kind
    if kind == "pass":
        return True
    if kind == "model":
        assert plan.model is not None
        return _clean_model(plan.model, data)
    if kind == "union":
        # `_walk` judges by the member with the fewest unknown fields: none if one is clean.
        return not isinstance(data, dict) or any(_clean_model(m, data) for m in plan.items)
    if kind == "dict":
        if not isinstance(data, dict):
            return True
        value_type = plan.items[0]
        return all(_clean(value_type, item) for item in data.values())
    if not isinstance(data, list):
        return True
    if kind == "tuple":
        items = plan.items
        return all(_clean(items[i], item) for i, item in enumerate(data) if i < len(items))
    item_type = plan.items[0]
    return all(_clean(item_type, item) for item in data)


def _clean_model(model: type[pydantic.BaseModel], data: Any) -> bool:
    if not isinstance(data, dict):
        return True
    table = wire_fields(model)
    keep_extra = _keeps_extra(model)
    for key, item in data.items():
        annotation = table.get(key, _UNDECLARED)
        if annotation is _UNDECLARED:
            if not keep_extra:
                return False
        elif not _clean(annotation, item):
            return False
    return True


def unknown_fields(model: type[pydantic.BaseModel], data: Any) -> list[str]:
    """Paths of every field in `data` that `model` (walked by aliases) does not declare."""
    if _clean_model(model, data):
        return []
    found: list[str] = []
    _walk_model(model, data, "", found.append)
    return found


def drop_unknown_fields(model: type[pydantic.BaseModel], data: Any) -> Any:
    """A copy of `data` without the fields `unknown_fields` reports (Ignore / Warn)."""
    return _walk_model(model, data, "", None)


# --- strict errors and warnings ---------------------------------------------------------


def _strict_items(unknown: Sequence[str], duplicates: Sequence[str]) -> list[str]:
    items = [f'unknown field "{path}"' for path in unknown]
    items += [f'duplicate field "{path}"' for path in duplicates]
    return list(dict.fromkeys(items))[:MAX_STRICT_ERRORS]


def strict_warnings(unknown: Sequence[str], duplicates: Sequence[str]) -> list[str]:
    """One warning text per problem, as kube sends them under fieldValidation=Warn."""
    return _strict_items(unknown, duplicates)


def strict_decoding_error(unknown: Sequence[str], duplicates: Sequence[str]) -> str:
    """'strict decoding error: unknown field "spec.foo", duplicate field "bar"'."""
    return "strict decoding error: " + ", ".join(_strict_items(unknown, duplicates))


def strict_error_message(kind: str, unknown: list[str], duplicates: list[str]) -> str:
    """kube's strict decoding text: 'strict decoding error: unknown field "spec.foo", ...'.

    `kind` does not appear: kube words the prefix per verb. A create or update answers 400
    with `cannot_handle_message(kind, text)`; a patch answers 422 with a single `patch`
    cause whose message is 'Invalid value: "<patched JSON>": <text>'.
    """
    del kind  # the strict text is the same for every kind
    return strict_decoding_error(unknown, duplicates)


def cannot_handle_message(kind: str, text: str, *, version: str = "v1") -> str:
    """'WorkflowRun in version "v1" cannot be handled as a WorkflowRun: <text>' (400)."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {text}'


_WARNING_ITEM_RUNES = 256
_WARNING_TOTAL_RUNES = 4 * 1024


def _quoted_warning(text: str) -> str:
    # Header values cannot hold control characters; kube would drop such a warning.
    clean = "".join(" " if not char.isprintable() else char for char in text)
    escaped = clean.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def warning_header_value(text: str) -> str:
    """`299 - "<text>"` for one Warning header, the text cut at 256 runes."""
    return _quoted_warning(text[:_WARNING_ITEM_RUNES])


def warning_header_values(texts: Sequence[str]) -> list[str]:
    """All Warning headers of a response, as kube's warning recorder writes them.

    Empty and repeated texts are dropped. Texts are sent whole while they total at most
    4096 runes; past that every text is cut at 256 runes, and once the cut texts reach
    the budget the rest are dropped.
    """
    seen: set[str] = set()
    ordered: list[str] = []
    headers: list[str] = []
    written, truncating = 0, False
    for text in texts:
        if not text or text in seen:
            continue
        if truncating and written >= _WARNING_TOTAL_RUNES:
            break
        seen.add(text)
        ordered.append(text)
        shown = text[:_WARNING_ITEM_RUNES] if truncating else text
        if truncating or written + len(shown) <= _WARNING_TOTAL_RUNES:
            written += len(shown)
            headers.append(_quoted_warning(shown))
            continue
        truncating = True
        headers = [_quoted_warning(item[:_WARNING_ITEM_RUNES]) for item in ordered]
        written = sum(len(item[:_WARNING_ITEM_RUNES]) for item in ordered)
    return headers
