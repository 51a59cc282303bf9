"""A tool call's trace entry keeps a readable summary of its arguments, never a payload."""

from __future__ import annotations

from plnt.api import traces


def test_arguments_are_kept_whole_with_whitespace_collapsed_when_short() -> None:
    assert traces.arguments_summary('{\n  "a": 2,\n  "b": 40\n}') == '{ "a": 2, "b": 40 }'


def test_long_arguments_are_cut_to_the_limit_and_marked() -> None:
    summary = traces.arguments_summary('{"text": "' + "x" * 1000 + '"}')
    assert len(summary) == traces.ARGUMENTS_SHOWN
    assert summary.startswith('{"text": "xxx') and summary.endswith("…")
