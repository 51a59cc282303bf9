"""JSON Schema -> GBNF: the grammars accept the JSON texts (in `json.dumps`' layout) that
satisfy the schema and refuse the ones that break what a grammar can hold.

To check that without a model, a grammar without recursion is turned into a Python regular
expression (its literals escaped, its character classes kept, its rules inlined); the real
model's server parsing and obeying these grammars is tested in `tests/model`."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.workflowspec import grammars

_TOKEN = re.compile(
    r'\s+|(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])'
    r"|(?P<name>[A-Za-z][A-Za-z0-9-]*)|(?P<rep>\{\d*,?\d*\})|(?P<op>[()|?*+])"
)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


def _literal(token: str) -> str:
    body, out, index = token[1:-1], [], 0
    while index < len(body):
        if body[index] == "\\":
            code = body[index + 1]
            if code == "x":
                out.append(chr(int(body[index + 2 : index + 4], 16)))
                index += 4
                continue
            out.append(_ESCAPES[code])
            index += 2
        else:
            out.append(body[index])
            index += 1
    return re.escape("".join(out))


def to_regex(grammar: str) -> re.Pattern[str]:
    rules = dict(line.split(" ::= ", 1) for line in grammar.strip().splitlines())

    def expand(name: str, active: tuple[str, ...]) -> str:
        assert name not in active, f"recursive rule {name}"
        parts = []
        for match in _TOKEN.finditer(rules[name]):
            kind, text = match.lastgroup, match.group()
            if kind == "lit":
                parts.append(_literal(text))
            elif kind in ("cls", "rep", "op"):
                parts.append(text)
            elif kind == "name":
                parts.append("(?:" + expand(text, (*active, name)) + ")")
        return "".join(parts)

    return re.compile(expand("root", ()))


def accepts(grammar: str, value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return to_regex(grammar).fullmatch(text) is not None


TICKET = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "technical", "other"]},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2},
        "score": {"type": ["integer", "null"]},
    },
    "required": ["category", "urgent"],
}


@pytest.mark.parametrize(
    "value",
    [
        {"category": "billing", "urgent": True},
        {"category": "other", "urgent": False, "tags": []},
        {"category": "technical", "urgent": False, "tags": ['a"b', "ü"], "score": -12},
        {"category": "billing", "urgent": True, "score": None},
    ],
)
def test_a_schema_grammar_accepts_valid_json_in_the_canonical_layout(value: Any) -> None:
    assert accepts(grammars.schema_grammar(TICKET), value)


@pytest.mark.parametrize(
    "text",
    [
        '{"category": "sales", "urgent": true}',  # not in the enum
        '{"urgent": true, "category": "billing"}',  # required ones come first, in order
        '{"category": "billing"}',  # a required property missing
        '{"category": "billing", "urgent": true, "tags": ["a", "b", "c"]}',  # maxItems
        '{"category": "billing", "urgent": true, "tags": ["toolongtag"]}',  # maxLength
        '{"category": "billing", "urgent": 1}',  # type
        '{"category": "billing", "urgent": true, "score": 1.5}',  # an integer
        '{"category":"billing","urgent":true}',  # the layout has spaces
    ],
)
def test_a_schema_grammar_refuses_what_breaks_the_schema(text: str) -> None:
    assert not accepts(grammars.schema_grammar(TICKET), text)


def test_an_object_of_optional_properties_allows_any_of_them_first_or_none() -> None:
    grammar = grammars.schema_grammar(
        {"type": "object", "properties": {"a": {"const": 1}, "b": {"type": "number"}}}
    )
    for value in [{}, {"a": 1}, {"b": 2.5e3}, {"a": 1, "b": -0.5}]:
        assert accepts(grammar, value), value
    assert not accepts(grammar, '{"a": 2}')


ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def test_an_agent_grammar_allows_a_valid_call_of_each_tool_or_a_final_answer() -> None:
    grammar = grammars.agent_grammar(
        [("add", ADD), ("now", {"type": "object", "properties": {"tz": {"type": "string"}}})], None
    )
    assert accepts(grammar, {"tool": "add", "arguments": {"a": 1, "b": 2}})
    assert accepts(grammar, {"answer": "three"})
    assert not accepts(grammar, {"tool": "add", "arguments": {"a": 1}})
    assert not accepts(grammar, {"tool": "mul", "arguments": {"a": 1, "b": 2}})
    assert not accepts(grammar, {"answer": 3})


def test_an_agent_grammar_holds_the_final_answer_to_the_response_schema() -> None:
    grammar = grammars.agent_grammar([("add", ADD)], {"type": "integer"})
    assert accepts(grammar, {"answer": 3})
    assert not accepts(grammar, {"answer": "3"})


@pytest.mark.parametrize("keyword", ["$ref", "allOf", "not", "if", "pattern"])
def test_keywords_a_grammar_cannot_hold_a_model_to_are_refused_by_path(keyword: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", keyword: {}}}}
    with pytest.raises(grammars.UnsupportedSchema) as caught:
        grammars.schema_grammar(schema)
    assert caught.value.path == f"$.properties.x.{keyword}"


def test_literals_escape_what_gbnf_would_read_otherwise() -> None:
    assert grammars.literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'


_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x7f"),
    max_size=8,
)
_TICKETS = st.fixed_dictionaries(
    {"category": st.sampled_from(["billing", "technical", "other"]), "urgent": st.booleans()},
    optional={
        "tags": st.lists(_TEXT, max_size=2),
        "score": st.none() | st.integers(-(10**15), 10**15),
    },
)


@given(_TICKETS)
def test_every_valid_instance_laid_out_canonically_is_in_the_grammar(value: dict[str, Any]) -> None:
    # Canonical layout: required properties first, then the optional ones in schema order.
    order = ["category", "urgent", "tags", "score"]
    laid_out = {key: value[key] for key in order if key in value}
    jsonschema.validate(laid_out, TICKET)
    assert accepts(grammars.schema_grammar(TICKET), laid_out)
