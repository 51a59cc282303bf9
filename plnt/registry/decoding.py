"""Request bodies to JSON values, and the strictness checks kube applies on the way.

kube-apiserver decodes bodies strictly on request (`fieldValidation=Strict`):
duplicate keys and fields the type does not declare are reported with their
paths, in texts kubectl users recognise ('strict decoding error: unknown field
"spec.foo"'), as a 400/422 or as `Warning: 299 - "..."` headers. Python's
parsers drop duplicates silently and pydantic would accept snake_case names, so
this module finds duplicates itself; unknown fields are `fieldvalidation`'s,
and kube's field causes `fieldcauses`'.

YAML is read as sigs.k8s.io/yaml reads it (YAML 1.1 scalars, but timestamps and
sexagesimal numbers stay strings, keys become strings).

Hostile bodies are refused cheaply, before they cost more than their size. kube's
decoders stop at 10 000 levels of nesting (Go's encoding/json, go-yaml's flow and
indentation limits) and refuse "excessive aliasing" (a document whose values come
mostly from alias expansion, go-yaml's defence against billion-laughs bombs). Python
cannot follow 10 000 levels (its parsers and every walk of the value recurse), and
PyYAML's scanner costs the square of the depth, so both formats stop at
`MAX_DEPTH` = 100 levels, counted before parsing (JSON: brackets outside strings) or
while scanning (YAML: flow levels plus block indentation). Alias expansion follows
go-yaml's ratio: up to 400 000 values nearly all may come from aliases, beyond 4
million at most 10 %, in between a sliding share.

Exceptions: `DecodeError(ValueError)` for a body that is not well-formed JSON or
YAML (400; the message carries the parser's position), and
`UnsupportedContentType(ValueError)` for a media type that is neither (415).
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import re
from typing import Any

import yaml

__all__ = [
    "JSON_CONTENT_TYPES",
    "MAX_DEPTH",
    "YAML_CONTENT_TYPES",
    "DecodeError",
    "UnsupportedContentType",
    "decode_body",
    "media_type",
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
MAX_DEPTH = 100
"""Levels of nesting a body may have (objects and arrays; YAML block indentation too)."""


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


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = [0] * 256
_BRACKET_STEP[ord("[")] = _BRACKET_STEP[ord("{")] = 1
_BRACKET_STEP[ord("]")] = _BRACKET_STEP[ord("}")] = -1


def _json_depth(data: bytes) -> int:
    """The deepest bracket nesting outside strings, found at C speed (exact for valid JSON).

    Strings go first (a regular expression), then everything but brackets (a
    translate); only when there are more opening brackets than `MAX_DEPTH` are the
    running depths summed.
    """
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    opening = brackets.count(b"[") + brackets.count(b"{")
    if opening <= MAX_DEPTH:
        return opening
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)))


def _decode_json(data: bytes) -> tuple[Any, list[str]]:
    if _json_depth(data) > MAX_DEPTH:
        raise DecodeError(f"malformed JSON: exceeded max depth of {MAX_DEPTH}")
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
    """SafeLoader resolving scalars like go-yaml v2, recording duplicate keys, bounding depth.

    The depth is checked where the scanner opens a level (a flow collection or a
    deeper block indentation), so a deeply nested document stops after `MAX_DEPTH`
    levels, before PyYAML's scanner (quadratic in the flow depth) or its recursive
    composer get far.
    """

    duplicates: dict[int, tuple[dict[Any, Any], list[str]]]

    def _check_depth(self) -> None:
        if self.flow_level + len(self.indents) >= MAX_DEPTH:
            mark = self.get_mark()
            raise DecodeError(
                f"malformed YAML at line {mark.line + 1}, column {mark.column + 1}: "
                f"exceeded max depth of {MAX_DEPTH}"
            )

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        self._check_depth()
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if self.indent is not None and self.indent < column:
            self._check_depth()
        return bool(super().add_indent(column))


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


_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


def allowed_alias_ratio(decoded: int) -> float:
    """The share of `decoded` values that may come from aliases (go-yaml's sliding ratio)."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


class _Converter:
    """Turn PyYAML's values into JSON values, expanding aliases under go-yaml's ratio.

    PyYAML shares one Python object among an anchor and its aliases, so a container
    met a second time is an alias being expanded: every value under it counts as
    aliased. The check runs as values are produced, so a bomb stops within a few
    hundred thousand values whatever it would expand to.
    """

    def __init__(self, *, repeated: dict[int, list[str]]) -> None:
        self.repeated = repeated
        self.duplicates: list[str] = []
        self.decoded = 0
        self.aliased = 0
        self._open: set[int] = set()
        self._seen: set[int] = set()
        self._in_alias = 0

    def _count(self) -> None:
        self.decoded += 1
        if not self._in_alias:
            return
        self.aliased += 1
        if (
            self.aliased > 100
            and self.decoded > 1000
            and self.aliased > allowed_alias_ratio(self.decoded) * self.decoded
        ):
            raise DecodeError("malformed YAML: document contains excessive aliasing")

    def convert(self, value: Any, path: str) -> Any:
        self._count()
        if isinstance(value, dict | list | tuple):
            key = id(value)
            if key in self._open:
                raise DecodeError(f"malformed YAML: recursive alias at {path or 'the top level'}")
            alias = key in self._seen
            self._seen.add(key)
            self._open.add(key)
            self._in_alias += alias
            try:
                return self._container(value, path)
            finally:
                self._in_alias -= alias
                self._open.discard(key)
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
        repeated={key: keys for key, (_, keys) in loader.duplicates.items()},
    )
    try:
        value = converter.convert(raw, "")
    except RecursionError:
        raise DecodeError("malformed YAML: nesting too deep") from None
    return value, converter.duplicates
