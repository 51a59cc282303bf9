"""An invoke form from the workflow's inputs JSON Schema, and inputs back from the form.

Only the top level of an object schema becomes fields: strings (a select for an `enum`),
numbers, integers and booleans get their own widgets; anything else (objects, arrays,
schemas this does not know) is a JSON text area. Validation is the API's: the form does
not check anything itself, so the messages shown are the ones the runner gives (422).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plnt.api import codec


class FormError(ValueError):
    """A field's text cannot be read as its type (`field` names it)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Field:
    """One input of the form."""

    name: str
    widget: str
    """`text`, `number`, `integer`, `checkbox`, `select` or `json`."""
    required: bool
    description: str
    default: str
    options: tuple[str, ...] = ()


def _widget(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "select"
    if kind == "string":
        return "text"
    if kind in ("number", "integer"):
        return str(kind)
    if kind == "boolean":
        return "checkbox"
    return "json"


def fields(schema: Mapping[str, Any] | None) -> list[Field]:
    """The form's fields, in the schema's order, required ones marked."""
    schema = schema or {}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return [Field("", "json", False, "All inputs, as one JSON object.", "{}")]
    required = set(schema.get("required") or [])
    out: list[Field] = []
    for name, sub in properties.items():
        sub = sub if isinstance(sub, Mapping) else {}
        widget = _widget(sub)
        default = sub.get("default")
        if default is None:
            text = ""
        elif widget == "json":
            text = codec.dumps(default).decode()
        else:
            text = str(default).lower() if isinstance(default, bool) else str(default)
        out.append(
            Field(
                name=str(name),
                widget=widget,
                required=name in required,
                description=str(sub.get("description") or ""),
                default=text,
                options=tuple(str(v) for v in sub.get("enum") or ()),
            )
        )
    return out


def inputs(form_fields: list[Field], values: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs object from the form's values; an empty field is left out.

    Raises `FormError` for text that is not a number or not JSON.
    """
    if len(form_fields) == 1 and form_fields[0].name == "":
        return _json_object("", values.get("", "") or "{}")
    out: dict[str, Any] = {}
    for field in form_fields:
        raw = values.get(field.name)
        if field.widget == "checkbox":
            if raw is not None:
                out[field.name] = bool(raw)
            continue
        if raw is None or raw == "":
            continue
        text = str(raw)
        if field.widget == "integer":
            try:
                out[field.name] = int(text)
            except ValueError as error:
                raise FormError(field.name, "must be an integer") from error
        elif field.widget == "number":
            try:
                out[field.name] = float(text)
            except ValueError as error:
                raise FormError(field.name, "must be a number") from error
        elif field.widget == "json":
            try:
                out[field.name] = codec.loads(text)
            except ValueError as error:
                raise FormError(field.name, f"is not JSON: {error}") from error
        else:
            out[field.name] = text
    return out


def _json_object(name: str, text: str) -> dict[str, Any]:
    try:
        value = codec.loads(text)
    except ValueError as error:
        raise FormError(name, f"is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise FormError(name, "must be a JSON object")
    return value


def field_of(path: str) -> str:
    """The top-level field a runner problem path names: `$.topic` → `topic`, `$` → ``."""
    rest = path[1:] if path.startswith("$") else path
    rest = rest.lstrip(".")
    if rest.startswith("["):
        inner = rest[1:].split("]", 1)[0]
        return inner.strip("'\"")
    for separator in (".", "["):
        rest = rest.split(separator, 1)[0]
    return rest
