"""Request bodies to JSON values, and the strictness checks kube applies on the way.

kube-apiserver decodes bodies strictly on request (`fieldValidation=Strict`):
duplicate keys and fields the type does not declare are reported with their
paths, in texts kubectl users recognise ('strict decoding error: unknown field
"spec.foo"'), as a 400/422 or as `Warning: 299 - "..."` headers. Python's
parsers drop duplicates silently and pydantic would accept snake_case names, so
this module finds both itself, walking the wire models by their camelCase
aliases only, and turns pydantic validation errors into kube's field causes.

YAML is read as sigs.k8s.io/yaml reads it (YAML 1.1 scalars, but timestamps and
sexagesimal numbers stay strings, keys become strings); anchors are expanded
with a bound so an alias bomb cannot exhaust memory.

Exceptions: `DecodeError(ValueError)` for a body that is not well-formed JSON or
YAML (400; the message carries the parser's position), and
`UnsupportedContentType(ValueError)` for a media type that is neither (415).
"""

from __future__ import annotations

import ast
import datetime
import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import yaml

from plnt.registry.selectors import go_quote

__all__ = [
    "JSON_CONTENT_TYPES",
    "MAX_STRICT_ERRORS",
    "YAML_CONTENT_TYPES",
    "DecodeError",
    "FieldCause",
    "UnsupportedContentType",
    "cannot_handle_message",
    "decode_body",
    "drop_unknown_fields",
    "go_value",
    "invalid_message",
    "media_type",
    "strict_decoding_error",
    "strict_error_message",
    "strict_warnings",
    "unknown_fields",
    "validation_causes",
    "warning_header_value",
    "warning_header_values",
]

JSON_CONTENT_TYPES = frozenset(
    {
        "",
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        # A client that labels its body "anything" gets JSON, the API's default format.
        "*/*",
        "application/*",
    }
)
YAML_CONTENT_TYPES = frozenset({"application/yaml", "application/apply-patch+yaml"})
MAX_STRICT_ERRORS = 100  # kube stops collecting strict errors after this many


class DecodeError(ValueError):
    """The body is not well-formed JSON or YAML."""


class UnsupportedContentType(ValueError):
    """The body's media type is neither JSON nor YAML."""


def media_type(content_type: str) -> str:
    """The lower-cased media type without parameters (`; charset=utf-8` is dropped)."""
    return content_type.split(";", 1)[0].strip().lower()


def decode_body(data: bytes, *, content_type: str) -> tuple[Any, list[str]]:
    """Decode a request body; return the value and the paths of duplicated keys.

    Duplicates keep the last value (as Go's decoder does); their paths read like
    kube's: "spec.replicas", "status.history[0].digest", or "bar" at the top.
    """
    kind = media_type(content_type)
    if kind in JSON_CONTENT_TYPES:
        return _decode_json(data)
    if kind in YAML_CONTENT_TYPES:
        return _decode_yaml(data)
    raise UnsupportedContentType(f"unsupported media type {kind!r}: expected JSON or YAML")


# --- JSON -------------------------------------------------------------------------------


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise DecodeError(f"malformed JSON: number {text} is out of range")
    return number


def _no_constants(text: str) -> Any:
    raise DecodeError(f"malformed JSON: {text} is not a JSON value")


def _decode_json(data: bytes) -> tuple[Any, list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DecodeError(f"malformed JSON: invalid UTF-8 at byte {error.start}") from None
    # Objects are built by the hook; those with repeated keys are remembered (with a
    # reference, so their ids stay unique) and located by a walk only when there are any.
    repeated: dict[int, tuple[dict[str, Any], list[str]]] = {}

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        built: dict[str, Any] = {}
        twice: list[str] = []
        for key, value in pairs:
            if key in built and key not in twice:
                twice.append(key)
            built[key] = value
        if twice:
            repeated[id(built)] = (built, twice)
        return built

    try:
        value = json.loads(
            text, object_pairs_hook=build, parse_float=_finite_float, parse_constant=_no_constants
        )
    except json.JSONDecodeError as error:
        raise DecodeError(
            f"malformed JSON at line {error.lineno}, column {error.colno} "
            f"(char {error.pos}): {error.msg}"
        ) from None
    except RecursionError:
        raise DecodeError("malformed JSON: nesting too deep") from None
    if not repeated:
        return value, []
    duplicates: list[str] = []
    _find_duplicates(value, "", {key: keys for key, (_, keys) in repeated.items()}, duplicates)
    return value, duplicates


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _find_duplicates(value: Any, path: str, repeated: dict[int, list[str]], out: list[str]) -> None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, dict):
            out.extend(_join(where, key) for key in repeated.get(id(current), ()))
            stack.extend((item, _join(where, key)) for key, item in reversed(current.items()))
        elif isinstance(current, list):
            stack.extend((item, f"{where}[{i}]") for i, item in reversed(list(enumerate(current))))


# --- YAML -------------------------------------------------------------------------------

_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_DROPPED_TAGS = {
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:timestamp",
}


class _Loader(yaml.SafeLoader):
    """SafeLoader resolving scalars like go-yaml v2 and recording duplicate keys."""

    duplicates: dict[int, tuple[dict[Any, Any], list[str]]]


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def _construct_float(loader: _Loader, node: yaml.Node) -> float:
    text = str(loader.construct_scalar(node)).replace("_", "")  # type: ignore[arg-type]
    lowered = text.lower()
    if lowered.endswith(".inf") or lowered == ".nan":
        return float(lowered.replace(".", ""))
    return float(text)


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Any:
    built: dict[Any, Any] = {}
    yield built
    seen: set[str] = set()
    twice: list[str] = []
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # keys merged in with `<<` may be overridden without being duplicates
        key = _key_text(loader.construct_object(key_node, deep=True))
        if key in seen and key not in twice:
            twice.append(key)
        seen.add(key)
    built.update(loader.construct_mapping(node, deep=False))
    if twice:
        loader.duplicates[id(built)] = (built, twice)


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, str | int | float):
        return str(key)
    raise DecodeError(f"malformed YAML: a mapping key must be a scalar, got {type(key).__name__}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_surrogates(text: str) -> str:
    """PyYAML leaves JSON's escaped surrogate pairs ("\\ud83d\\ude00") as two halves."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


class _Converter:
    """Turn PyYAML's values into JSON values, expanding aliases under a size bound."""

    def __init__(self, *, budget: int, repeated: dict[int, list[str]]) -> None:
        self.budget = budget
        self.repeated = repeated
        self.duplicates: list[str] = []
        self._open: set[int] = set()

    def convert(self, value: Any, path: str) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise DecodeError("malformed YAML: the document expands to too many values (aliases)")
        if isinstance(value, dict | list | tuple):
            if id(value) in self._open:
                raise DecodeError(f"malformed YAML: recursive alias at {path or 'the top level'}")
            self._open.add(id(value))
            try:
                return self._container(value, path)
            finally:
                self._open.discard(id(value))
        if isinstance(value, float) and not math.isfinite(value):
            raise DecodeError(f"malformed YAML: {value} at {path or 'the top level'} is not JSON")
        if isinstance(value, datetime.date | datetime.datetime):
            return value.isoformat()
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        if isinstance(value, str):
            return _join_surrogates(value)
        return value

    def _container(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...], path: str) -> Any:
        if isinstance(value, dict):
            self.duplicates.extend(_join(path, key) for key in self.repeated.get(id(value), ()))
            converted: dict[str, Any] = {}
            for key, item in value.items():
                text = _join_surrogates(_key_text(key))
                converted[text] = self.convert(item, _join(path, text))
            return converted
        return [self.convert(item, f"{path}[{index}]") for index, item in enumerate(value)]


def _decode_yaml(data: bytes) -> tuple[Any, list[str]]:
    loader: _Loader | None = None
    try:
        loader = _Loader(data)  # the reader already checks the encoding and characters
        loader.duplicates = {}
        raw = loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DecodeError(f"malformed YAML{where}: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise DecodeError(f"malformed YAML: {error}") from None
    except RecursionError:
        raise DecodeError("malformed YAML: nesting too deep") from None
    finally:
        if loader is not None:
            loader.dispose()
    converter = _Converter(
        budget=100_000 + 10 * len(data),
        repeated={key: keys for key, (_, keys) in loader.duplicates.items()},
    )
    try:
        value = converter.convert(raw, "")
    except RecursionError:
        raise DecodeError("malformed YAML: nesting too deep") from None
    return value, converter.duplicates


# --- unknown fields ---------------------------------------------------------------------

_Visit = Callable[[str], None]


@functools.cache
def _wire_fields(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """Field annotations by the exact name clients must send (the alias); computed once."""
    table: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        table[alias or name] = info.annotation
    return table


def _is_model(annotation: Any) -> bool:
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
        models = tuple(arg for arg in members if _is_model(arg))
        return _Plan("union", items=models) if models else _Plan("pass")
    if _is_model(annotation):
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
            key: _walk(value_type, item, _join(path, key), unknown) for key, item in data.items()
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
    table = _wire_fields(model)
    keep_extra = model.model_config.get("extra") == "allow"
    kept: dict[str, Any] = {}
    for key, item in data.items():
        if key in table:
            kept[key] = _walk(table[key], item, _join(path, key), unknown)
        elif keep_extra:
            kept[key] = item
        elif unknown is not None:
            unknown(_join(path, key))
    return kept


def unknown_fields(model: type[pydantic.BaseModel], data: Any) -> list[str]:
    """Paths of every field in `data` that `model` (walked by aliases) does not declare."""
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


def _describe(error: Mapping[str, Any]) -> tuple[str, str]:
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
        detail = f"must be of type {_JSON_TYPES[stem]}"
        return "FieldValueTypeInvalid", f"Invalid value: {go_value(bad)}: {detail}"
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
            path = _join(path, part)
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
    if _is_model(annotation) and isinstance(part, str):
        return "field", _wire_fields(annotation).get(part)
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
    causes: list[FieldCause] = []
    for item in error.errors(include_url=False):
        reason, message = _describe(item)
        cause = FieldCause(_cause_path(item["loc"], root, model), reason, message)
        if cause not in causes:
            causes.append(cause)
    return causes


def invalid_message(qualified_kind: str, name: str, causes: Sequence[FieldCause]) -> str:
    """The 422 message: 'WorkflowRun.plnt.work "x" is invalid: [spec.replicas: ..., ...]'."""
    items = list(dict.fromkeys(f"{cause.field}: {cause.message}" for cause in causes))
    listed = items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
    return f"{qualified_kind} {go_quote(name)} is invalid: {listed}"
