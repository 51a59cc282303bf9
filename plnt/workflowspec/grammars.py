"""JSON Schemas turned into GBNF grammars: how a completion-mode model is held to a schema.

llama.cpp's servers (llama-cpp-python's among them) take a GBNF `grammar` on
`/v1/completions` and sample only tokens the grammar allows, so even a base model that
follows no instructions answers JSON of the right shape. plnt writes the grammar itself,
from the subset of JSON Schema a step's answer or a tool's arguments need, rather than
importing a converter from an inference server's package (the runner must run without
one installed).

The grammar emits one canonical layout — `json.dumps`' separators (`", "`, `": "`), object
properties in the schema's order, required ones first — so the text a model is shown in a
few-shot prompt and the text the grammar allows are the same. No free whitespace is
allowed, which keeps a small model from wandering off into blank space.

Supported: `type` (one or a list), `const`, `enum`, `anyOf`/`oneOf`, objects with
`properties`/`required`, arrays with `items`/`minItems`/`maxItems`, strings with
`minLength`/`maxLength`, integers, numbers, booleans, null, and the empty schema (any JSON
value). Keywords the grammar cannot hold a model to (`$ref`, `allOf`, `not`, `if`,
`pattern`, `patternProperties`) raise `UnsupportedSchema` naming where: a spec using them is
refused at load time rather than answered with a grammar that lies. Bounds the grammar does
not encode (`minimum`, `multipleOf`, `format` …) are left to the JSON Schema validation
every answer goes through.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

UNSUPPORTED = ("$ref", "allOf", "not", "if", "pattern", "patternProperties")

_PRIMITIVES = {
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": r'"\"" char* "\""',
    "integer": r'"-"? ("0" | [1-9] [0-9]{0,15})',
    "number": r'integer ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?',
    "boolean": r'"true" | "false"',
    "null": r'"null"',
    "ws": r"[ ]?",
    "value": r"object | array | string | number | boolean | null",
    "object": r'"{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}"',
    "array": r'"[" ws ( value ( "," ws value )* )? "]"',
}
_DEPENDS = {
    "string": ("char",),
    "number": ("integer",),
    "value": ("object", "array", "string", "number", "boolean", "null"),
    "object": ("ws", "string", "value"),
    "array": ("ws", "value"),
}


class UnsupportedSchema(ValueError):
    """A schema uses a keyword the grammar cannot express; `path` says where."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def json_literal(value: Any) -> str:
    """A JSON value, laid out as the grammar lays it out, as a GBNF literal."""
    return literal(json.dumps(value, ensure_ascii=False))


class Builder:
    """Collects rules; each schema becomes a rule whose body is an alternation of sequences."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self._bodies: dict[str, str] = {}
        self._counter = 0

    def primitive(self, name: str) -> str:
        """Reference a built-in rule (and what it needs)."""
        if name not in self.rules:
            self.rules[name] = _PRIMITIVES[name]
            for needed in _DEPENDS.get(name, ()):
                self.primitive(needed)
        return name

    def rule(self, body: str, *, hint: str = "r") -> str:
        """A named rule for `body` (the same body gets the same name)."""
        if body in self._bodies:
            return self._bodies[body]
        self._counter += 1
        name = f"{hint}-{self._counter}"
        self.rules[name] = body
        self._bodies[body] = name
        return name

    def schema(self, schema: Any, path: str) -> str:
        """The name of a rule matching JSON text valid for `schema` (as far as supported)."""
        if schema is True or schema == {}:
            return self.primitive("value")
        if not isinstance(schema, dict):
            raise UnsupportedSchema(path, "a schema must be an object")
        for keyword in UNSUPPORTED:
            if keyword in schema:
                raise UnsupportedSchema(f"{path}.{keyword}", "not supported in a grammar")
        if "const" in schema:
            return self.rule(json_literal(schema["const"]), hint="const")
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise UnsupportedSchema(f"{path}.enum", "must be a non-empty list")
            return self.rule(" | ".join(json_literal(value) for value in values), hint="enum")
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                options = schema[keyword]
                if not isinstance(options, list) or not options:
                    raise UnsupportedSchema(f"{path}.{keyword}", "must be a non-empty list")
                names = [
                    self.schema(option, f"{path}.{keyword}[{i}]")
                    for i, option in enumerate(options)
                ]
                return self.rule(" | ".join(names), hint="any")
        kind = schema.get("type")
        if kind is None:
            return self.primitive("value")
        if isinstance(kind, list):
            names = [self.schema({**schema, "type": one}, path) for one in kind]
            return self.rule(" | ".join(names), hint="types")
        if kind == "object":
            return self._object(schema, path)
        if kind == "array":
            return self._array(schema, path)
        if kind == "string":
            return self._string(schema)
        if kind in ("integer", "number", "boolean", "null"):
            return self.primitive(kind)
        raise UnsupportedSchema(f"{path}.type", f"unknown type {kind!r}")

    def _string(self, schema: dict[str, Any]) -> str:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        if low == 0 and high is None:
            return self.primitive("string")
        self.primitive("char")
        bound = f"{{{low},{high if high is not None else ''}}}"
        return self.rule(f'"\\"" char{bound} "\\""', hint="string")

    def _array(self, schema: dict[str, Any], path: str) -> str:
        item = self.schema(schema.get("items", {}), f"{path}.items")
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        if high == 0:
            return self.rule('"[]"', hint="array")
        more_low = max(low - 1, 0)
        more_high = "" if high is None else str(int(high) - 1)
        more = "" if more_high == "0" else f' ("," " " {item}){{{more_low},{more_high}}}'
        body = f'"[" {item}{more} "]"'
        if low == 0:
            body = f'"[]" | {body}'
        return self.rule(body, hint="array")

    def _object(self, schema: dict[str, Any], path: str) -> str:
        properties = schema.get("properties")
        if not properties:
            return self.primitive("object")
        if not isinstance(properties, dict):
            raise UnsupportedSchema(f"{path}.properties", "must be an object")
        required = [name for name in schema.get("required", []) if name in properties]
        optional = [name for name in properties if name not in required]
        pairs = {
            name: f"{literal(json.dumps(name) + ': ')} "
            + self.schema(properties[name], f"{path}.properties.{name}")
            for name in [*required, *optional]
        }
        if required:
            body = " ".join(
                [pairs[required[0]]]
                + [f'", " {pairs[name]}' for name in required[1:]]
                + [f'(", " {pairs[name]})?' for name in optional]
            )
            return self.rule(f'"{{" {body} "}}"', hint="object")
        # Only optional properties: the first one present has no comma before it.
        choices = ['"{}"']
        for index, name in enumerate(optional):
            rest = " ".join(f'(", " {pairs[later]})?' for later in optional[index + 1 :])
            choices.append(f'"{{" {pairs[name]} {rest} "}}"'.replace("  ", " "))
        return self.rule(" | ".join(choices), hint="object")

    def render(self, root: str) -> str:
        """The grammar text, `root` first."""
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"


def schema_grammar(schema: Any, *, path: str = "$") -> str:
    """A grammar whose sentences are JSON texts valid for `schema` (the supported subset)."""
    builder = Builder()
    return builder.render(builder.schema(schema, path))


ToolSchema = tuple[str, dict[str, Any]]


def agent_grammar(tools: Sequence[ToolSchema], answer: Any | None, *, path: str = "$") -> str:
    """A grammar whose sentences are one action of an agent's turn: a tool call,
    `{"tool": NAME, "arguments": {...}}` with arguments valid for that tool, or the final
    answer, `{"answer": ...}` (valid for `answer`; any string when it is None)."""
    builder = Builder()
    calls = []
    for name, parameters in tools:
        arguments = builder.schema(parameters, f"{path}.tools({name}).parameters")
        head = literal('{"tool": ' + json.dumps(name) + ', "arguments": ')
        calls.append(builder.rule(f'{head} {arguments} "}}"', hint="call"))
    if answer is None:
        final = builder.primitive("string")
    else:
        final = builder.schema(answer, f"{path}.responseFormat.jsonSchema")
    head = literal('{"answer": ')
    answer_rule = builder.rule(f'{head} {final} "}}"', hint="answer")
    return builder.render(" | ".join([*calls, answer_rule]))
