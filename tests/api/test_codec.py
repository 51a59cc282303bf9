"""JSON bytes in and out: compact, key order stable when asked, nothing valid refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plnt.api import codec

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON)
def test_what_dumps_writes_loads_reads_back_equal(value: Any) -> None:
    assert codec.loads(codec.dumps(value)) == value
    assert codec.loads(codec.dumps(value).decode()) == value


@given(st.dictionaries(st.text(max_size=8), INT64, max_size=8))
def test_sorted_dumps_are_byte_stable_whatever_the_insertion_order(value: dict[str, int]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert codec.dumps_sorted(value) == codec.dumps_sorted(reordered)
    assert (
        codec.dumps_sorted(value)
        == json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    )


def test_output_is_compact_json_without_spaces() -> None:
    assert codec.dumps({"a": [1, 2], "b": None}) == b'{"a":[1,2],"b":null}'


def test_an_integer_beyond_64_bits_is_written_rather_than_refused() -> None:
    big = 2**70
    assert codec.dumps({"n": big}) == b'{"n":1180591620717411303424}'
    assert codec.dumps_sorted({"z": 1, "n": big}) == b'{"n":1180591620717411303424,"z":1}'


def test_an_integer_beyond_64_bits_reads_back_exactly_not_as_a_float() -> None:
    for big in (2**64, 2**70, -(2**65), 10**30):
        text = b'{"n":%d,"s":"x"}' % big
        assert codec.loads(text) == {"n": big, "s": "x"}
        assert type(codec.loads(text.decode())["n"]) is int


def test_loads_accepts_what_the_standard_library_accepts() -> None:
    # orjson refuses NaN; the fallback parses it as Python's json does.
    loaded = codec.loads('{"x": NaN}')
    assert loaded["x"] != loaded["x"]


def test_json_nested_beyond_any_parser_limit_is_a_value_error_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested too deeply"):
        codec.loads(deep)
