"""pydantic validation errors as kube field causes: paths, reasons and messages kubectl prints.

A 422 Invalid lists every field error as `field: message` with kube's reasons
(FieldValueRequired, FieldValueInvalid, FieldValueNotSupported,
FieldValueTypeInvalid) and Go's way of printing values, so plnt's errors read
like kube-apiserver's.
"""

from __future__ import annotations

import ast
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from plnt.registry.fieldvalidation import is_model, join_path, wire_fields
from plnt.registry.labelnames import go_quote

# --- validation errors as kube field causes ---------------------------------------------


@dataclass(frozen=True)
class FieldCause:
    """One metav1.StatusCause: the field path, the cause type and kube's message body."""

    field: str
    reason: str
    message: str


def go_value(value: Any) -> str:
    """A bad value as kube's field errors print it: %v for numbers, %q for strings, else JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _go_float(value: float) -> str:
    """Go's %v for a float64: shortest digits, exponent form below 1e-4 or from 1e6."""
    if not math.isfinite(value):
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(value, "NaN")
    if value == 0:
        return "0" if math.copysign(1, value) > 0 else "-0"
    text = repr(value)
    mantissa, _, exponent_text = text.partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    digits = mantissa.replace("-", "").replace(".", "").lstrip("0")
    point = len(mantissa.replace("-", "").split(".")[0].lstrip("0"))
    if point == 0:  # 0.000ddd
        fraction = mantissa.replace("-", "").split(".")[1]
        point = -(len(fraction) - len(fraction.lstrip("0")))
    exponent10 = point + exponent - 1
    digits = digits.rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    if exponent10 < -4 or exponent10 >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exponent10 < 0 else '+'}{abs(exponent10):02d}"
    if exponent10 < 0:
        return f"{sign}0.{'0' * (-exponent10 - 1)}{digits}"
    whole, fraction = digits[: exponent10 + 1], digits[exponent10 + 1 :]
    whole = whole.ljust(exponent10 + 1, "0")
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


_JSON_TYPES = {
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "string": "string",
    "str": "string",
    "dict": "object",
    "model": "object",
    "model_attributes": "object",
    "list": "array",
    "tuple": "array",
    "set": "array",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "must be greater than or equal to {}"),
    "greater_than": ("gt", "must be greater than {}"),
    "less_than_equal": ("le", "must be less than or equal to {}"),
    "less_than": ("lt", "must be less than {}"),
    "multiple_of": ("multiple_of", "must be a multiple of {}"),
}
_LITERAL_TOKEN = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s,]+")


def _supported_values(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" as kube's '"a", "b", "c"'."""
    shown = []
    for token in _LITERAL_TOKEN.findall(expected):
        if token == "or":
            continue
        try:
            value = ast.literal_eval(token)
        except (ValueError, SyntaxError):
            value = token
        shown.append(go_quote(go_value(value) if not isinstance(value, str) else value))
    return ", ".join(shown)


def json_type(value: Any) -> str:
    """The OpenAPI type name of a JSON value, as kube's schema validator names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def _describe(error: Mapping[str, Any], path: str) -> tuple[str, str]:
    kind: str = error["type"]
    context: Mapping[str, Any] = error.get("ctx") or {}
    bad = error.get("input")
    message: str = error.get("msg", "")
    if kind.startswith("FieldValue"):  # a PydanticCustomError named after a kube cause type
        return kind, message
    if kind == "missing":
        return "FieldValueRequired", "Required value"
    if kind in _BOUNDS:
        key, template = _BOUNDS[kind]
        detail = template.format(go_value(context.get(key)))
        return "FieldValueInvalid", f"Invalid value: {go_value(bad)}: {detail}"
    if kind in ("literal_error", "enum"):
        supported = _supported_values(str(context.get("expected", "")))
        return (
            "FieldValueNotSupported",
            f"Unsupported value: {go_value(bad)}: supported values: {supported}",
        )
    if kind == "string_pattern_mismatch":
        detail = f"must match the regular expression '{context.get('pattern')}'"
        return "FieldValueInvalid", f"Invalid value: {go_value(bad)}: {detail}"
    if kind == "string_too_short":
        if bad == "" and context.get("min_length") == 1:
            return "FieldValueRequired", "Required value"
        detail = f"must be at least {context.get('min_length')} characters long"
        return "FieldValueInvalid", f"Invalid value: {go_value(bad)}: {detail}"
    if kind == "string_too_long":
        return (
            "FieldValueTooLong",
            f"Too long: may not be more than {context.get('max_length')} characters",
        )
    if kind == "too_long":
        detail = f"must have at most {context.get('max_length')} items"
        return "FieldValueTooMany", f"Too many: {context.get('actual_length')}: {detail}"
    if kind == "too_short":
        detail = f"must have at least {context.get('min_length')} items"
        return "FieldValueInvalid", f"Invalid value: {go_value(bad)}: {detail}"
    if kind == "extra_forbidden":
        return "FieldValueForbidden", "Forbidden: unknown field"
    stem = kind.removesuffix("_type").removesuffix("_parsing").removesuffix("_from_float")
    if kind != stem and stem in _JSON_TYPES:
        # A structural schema's wording (kube-openapi's InvalidType via field.TypeInvalid).
        actual = go_quote(json_type(bad))
        detail = f"{path} in body must be of type {_JSON_TYPES[stem]}: {actual}"
        return "FieldValueTypeInvalid", f"Invalid value: {actual}: {detail}"
    detail = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return "FieldValueInvalid", f"Invalid value: {go_value(bad)}: {detail}"


def _cause_path(
    location: Sequence[int | str], root: str, model: type[pydantic.BaseModel] | None
) -> str:
    path = root
    current: Any = model
    for part in location:
        kind, current = _step(current, part)
        if kind == "skip":
            continue
        if isinstance(part, int) or kind == "key":
            path += f"[{part}]"
        else:
            path = join_path(path, part)
    return path


def _step(annotation: Any, part: int | str) -> tuple[str, Any]:
    """How a loc element reads under `annotation` ("field", "key", "index" or "skip")."""
    while True:
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if origin is typing.Annotated:
            annotation = args[0]
            continue
        if origin in (typing.Union, types.UnionType):
            members = [arg for arg in args if arg is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
            return "skip", None  # pydantic names the union member it tried here
        break
    if is_model(annotation) and isinstance(part, str):
        return "field", wire_fields(annotation).get(part)
    if origin in (dict, Mapping) and len(args) == 2:
        return "key", args[1]
    if origin in (list, set, frozenset, Sequence, tuple) and args:
        return "index", args[0]
    return "field", None


def validation_causes(
    error: pydantic.ValidationError,
    *,
    root: str = "",
    model: type[pydantic.BaseModel] | None = None,
) -> list[FieldCause]:
    """kube field causes for a pydantic validation error, one per problem, in order.

    Paths use the wire (camelCase) names with `[i]` indices, prefixed by `root`
    ("spec" when validating a spec alone). With `model` (the validated class) map keys
    read `[key]` like kube's field paths, and union member tags are left out.
    """
    return error_causes(error.errors(include_url=False), root=root, model=model)


def error_causes(
    items: Sequence[Mapping[str, Any]],
    *,
    root: str = "",
    model: type[pydantic.BaseModel] | None = None,
) -> list[FieldCause]:
    """`validation_causes` of pydantic's error items (some may have been set aside)."""
    causes: list[FieldCause] = []
    for item in items:
        path = _cause_path(item["loc"], root, model)
        reason, message = _describe(item, path)
        cause = FieldCause(path, reason, message)
        if cause not in causes:
            causes.append(cause)
    return causes


def invalid_message(qualified_kind: str, name: str, causes: Sequence[FieldCause]) -> str:
    """The 422 message: 'WorkflowRun.plnt.work "x" is invalid: [spec.replicas: ..., ...]'."""
    items = list(dict.fromkeys(f"{cause.field}: {cause.message}" for cause in causes))
    listed = items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
    return f"{qualified_kind} {go_quote(name)} is invalid: {listed}"
