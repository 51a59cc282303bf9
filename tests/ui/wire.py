"""API objects generated from the API's own JSON Schema, for the page property tests.

`objects(Model)` draws JSON values that match `Model.model_json_schema()` (what the API
server publishes in its OpenAPI document): every optional field is sometimes absent,
sometimes null where the schema allows null, sometimes a value; lists are empty or short;
strings hold markup and non-ASCII text. Only the subset of JSON Schema that pydantic
writes is understood, and an unknown keyword is an error, so a schema change that this
module cannot follow fails loudly instead of generating less.

Why not `hypothesis-jsonschema`: its last release (0.23.1) calls a private hypothesis API
that current hypothesis no longer has, and fails on its first object; `st.from_type` on
the models cannot draw `Any` fields (outputs, inputs, bench results).

Wire shapes kept as open objects by the API's models (a step trace is `list[dict]` in
`InvocationStatus`) are drawn from their TypedDicts instead (`typed`, `plnt.api.traces`):
every key they require, each of the others sometimes.

Two things the schema cannot say are added by field name, as a server writes them:
timestamps (fields named `…Time`, `…Timestamp`, `…At`, `since`, `time`) are often RFC
3339 (with and without the `Z`), and open objects whose fields the harness owns (bench
results) get the harness's shape half of the time (`bench_results`).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from typing import Any, NotRequired, is_typeddict

from hypothesis import strategies as st
from pydantic import BaseModel

from plnt.api import usage
from plnt.harness import result as harness

JSON = Any

# Schema keywords with no bearing on the values drawn.
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "$defs"})
UNDERSTOOD = ANNOTATIONS | {
    "$ref", "anyOf", "oneOf", "enum", "const", "type", "properties", "required",
    "additionalProperties", "items", "minItems", "maxItems", "minLength", "maxLength",
    "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "x-kubernetes-int-or-string",
}  # fmt: skip

MAX_ITEMS = 3
"""Longest list or map drawn: a page's every branch shows with two or three entries."""

TIME_SUFFIXES = ("Time", "Timestamp", "At")
TIME_NAMES = frozenset({"since", "time"})

text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
) | st.sampled_from(["", "<b>x</b>", "a & b", "Ready", "ünïcode"])

timestamps = st.one_of(
    st.datetimes(timezones=st.none()).map(lambda t: t.replace(microsecond=0).isoformat() + "Z"),
    st.datetimes(timezones=st.none()).map(lambda t: t.replace(microsecond=0).isoformat()),
    text,
)
"""RFC 3339 in UTC as the API writes it, one without a zone, or any text (a bad writer)."""

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)

json_values: st.SearchStrategy[JSON] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text,
    lambda inner: (
        st.lists(inner, max_size=MAX_ITEMS) | st.dictionaries(text, inner, max_size=MAX_ITEMS)
    ),
    max_leaves=6,
)
"""Any JSON value: what a field typed `Any` may hold."""


def _is_time(name: str) -> bool:
    return name in TIME_NAMES or name.endswith(TIME_SUFFIXES)


def _number(schema: Mapping[str, Any], *, integer: bool) -> st.SearchStrategy[JSON]:
    """Within the schema's bounds; unbounded ends stop where JSON numbers stay exact."""
    low = schema.get("exclusiveMinimum", schema.get("minimum", -(2**53)))
    high = schema.get("exclusiveMaximum", schema.get("maximum", 2**53))
    open_low, open_high = "exclusiveMinimum" in schema, "exclusiveMaximum" in schema
    if integer:
        return st.integers(
            min_value=math.floor(low) + 1 if open_low else low,
            max_value=math.ceil(high) - 1 if open_high else high,
        )
    return st.floats(
        min_value=low, max_value=high, exclude_min=open_low, exclude_max=open_high,
        allow_nan=False,
    )  # fmt: skip


def _string(schema: Mapping[str, Any], name: str) -> st.SearchStrategy[JSON]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if "pattern" in schema:
        drawn: st.SearchStrategy[str] = st.from_regex(schema["pattern"], fullmatch=True)
    elif _is_time(name):
        drawn = timestamps
    else:
        drawn = text
    if low or high is not None:
        drawn = drawn.filter(lambda s: low <= len(s) <= (high if high is not None else len(s)))
        if "pattern" not in schema:
            drawn = drawn | st.just("x" * max(low, 1))
    return drawn


class Generator:
    """Strategies for one root schema (its `$defs` resolve against it)."""

    def __init__(self, root: Mapping[str, Any], overrides: Mapping[str, st.SearchStrategy[JSON]]):
        self.root = root
        self.overrides = overrides

    def of(self, schema: Mapping[str, Any], name: str = "") -> st.SearchStrategy[JSON]:
        unknown = set(schema) - UNDERSTOOD
        if unknown:
            raise ValueError(f"schema keywords not understood at {name or 'the root'}: {unknown}")
        if name in self.overrides:
            return self.overrides[name]
        if "$ref" in schema:
            target = schema["$ref"].removeprefix("#/$defs/")
            return st.deferred(lambda: self.of(self.root["$defs"][target], name))
        for combined in ("anyOf", "oneOf"):
            if combined in schema:
                return st.one_of([self.of(part, name) for part in schema[combined]])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        if "const" in schema:
            return st.just(schema["const"])
        if schema.get("x-kubernetes-int-or-string"):
            return st.integers() | text
        kind = schema.get("type")
        if kind is None:
            return json_values
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind in ("integer", "number"):
            return _number(schema, integer=kind == "integer")
        if kind == "string":
            return _string(schema, name)
        if kind == "array":
            return st.lists(
                self.of(schema.get("items", {}), name),
                min_size=schema.get("minItems", 0),
                max_size=min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS),
            )
        if kind == "object":
            return self._object(schema)
        raise ValueError(f"schema type not understood at {name}: {kind}")

    def _object(self, schema: Mapping[str, Any]) -> st.SearchStrategy[JSON]:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        extra = schema.get("additionalProperties", not properties)
        fixed = st.fixed_dictionaries(
            {key: self.of(sub, key) for key, sub in properties.items() if key in required},
            optional={
                key: self.of(sub, key) for key, sub in properties.items() if key not in required
            },
        )
        if not extra:
            return fixed
        values = json_values if extra is True else self.of(extra)
        more = st.dictionaries(text.filter(lambda k: k not in properties), values, max_size=2)
        return st.builds(lambda known, free: {**free, **known}, fixed, more)


def objects(
    model: type[BaseModel], **overrides: st.SearchStrategy[JSON]
) -> st.SearchStrategy[dict[str, Any]]:
    """Wire objects (camelCase) of `model`, drawn from its JSON Schema. `overrides` give
    the values of the fields of that name wherever they are (e.g. `results=…`)."""
    schema = model.model_json_schema(by_alias=True)
    return Generator(schema, overrides).of(schema)  # type: ignore[no-any-return]


percentiles = st.builds(
    harness.Percentiles,
    count=st.integers(0, 10**6),
    p50_ms=finite,
    p90_ms=finite,
    p95_ms=finite,
    p99_ms=finite,
    max_ms=finite,
    mean_ms=finite,
)
optional_fraction = st.none() | st.floats(0.0, 1.0)
harness_results = st.builds(
    harness.BenchResult,
    label=text,
    requested_rate=st.none() | finite,
    achieved_rate=finite,
    requests=st.integers(0, 10**6),
    duration_seconds=finite,
    latency=percentiles,
    errors=st.dictionaries(st.sampled_from(harness.ERROR_CLASSES), st.integers(0, 100)),
    error_rate=st.floats(0.0, 1.0),
    steps=st.dictionaries(text, percentiles, max_size=2),
    hops=st.dictionaries(text, percentiles, max_size=2),
    cache_hit_rate=optional_fraction,
    cache_reason=st.none() | text,
    time_to_first_token=st.none() | percentiles,
    tokens_per_second=st.none() | finite,
    gpu_utilization=st.none() | finite,
    gpu_reason=st.none() | text,
    generator_cpu_seconds=finite,
    generator_cpu_ratio=finite,
    kv_cache_usage=st.none() | finite,
).map(lambda result: result.to_json())

bench_results = st.lists(
    harness_results | st.dictionaries(text, json_values, max_size=MAX_ITEMS), max_size=MAX_ITEMS
)
"""A bench's `results`: the harness's JSON (which the schema leaves open) or any object."""


def _mentions(hint: Any, shape: Any) -> bool:
    """Whether the annotation `hint` holds `shape` (a TypedDict nested in itself)."""
    return hint is shape or any(_mentions(a, shape) for a in typing.get_args(hint))


def typed(
    shape: Any, _within: tuple[Any, ...] = (), **overrides: st.SearchStrategy[JSON]
) -> st.SearchStrategy[JSON]:
    """Values of a TypedDict (or of a type it holds: str, int, float, bool, lists, dicts,
    `Any`), keys of the TypedDict's own name in `overrides` drawn from there instead. An
    annotation not understood is an error, as an unknown schema keyword is. A TypedDict that
    holds itself (a step's nested `steps`) is drawn one level deep: inside, its optional
    keys that would nest it again are left out."""
    if is_typeddict(shape):
        hints = typing.get_type_hints(shape)
        # Under postponed annotations a TypedDict cannot see `NotRequired` by itself.
        marked = typing.get_type_hints(shape, include_extras=True)
        optional = shape.__optional_keys__ | {
            name for name, hint in marked.items() if typing.get_origin(hint) is NotRequired
        }
        within = (*_within, shape)

        def key(name: str) -> st.SearchStrategy[JSON]:
            if name in overrides:
                return overrides[name]
            return typed(hints[name], within, **overrides)

        def kept(name: str) -> bool:
            return not (shape in _within and _mentions(hints[name], shape))

        return st.fixed_dictionaries(
            {name: key(name) for name in hints if name not in optional},
            optional={name: key(name) for name in hints if name in optional and kept(name)},
        )
    origin, arguments = typing.get_origin(shape), typing.get_args(shape)
    if shape is Any:
        return json_values
    if shape is str:
        return text
    if shape is bool:
        return st.booleans()
    if shape is int:
        return st.integers(-(2**31), 2**31)
    if shape is float:
        return finite | st.integers(0, 10**6)
    if origin is list:
        return st.lists(typed(arguments[0], _within, **overrides), max_size=MAX_ITEMS)
    if origin is dict:
        return st.dictionaries(text, typed(arguments[1], _within, **overrides), max_size=MAX_ITEMS)
    raise ValueError(f"annotation not understood: {shape!r}")


usages = st.fixed_dictionaries(
    {},
    optional={
        "prompt_tokens": st.integers(0, 10**6),
        "completion_tokens": st.integers(0, 10**6),
        "total_tokens": st.integers(0, 10**6),
        "source": st.sampled_from([str(source) for source in usage.UsageSource]),
    },
)
"""OpenAI's `usage` object as a turn carries it (`plnt.api.usage`)."""
