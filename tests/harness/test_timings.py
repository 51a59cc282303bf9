"""Server-Timing, trace, cache and usage parsing: what the runner and the API server send."""

from __future__ import annotations

from plnt.harness import timings


def test_server_timing_yields_each_named_duration_and_skips_the_malformed() -> None:
    header = (
        'runner;dur=1.250, backend;dur=0.5;desc="vllm", apiserver;desc="x";dur=0.3,'
        " broken;dur=abc, nodur, ;dur=4"
    )
    assert list(timings.server_timing(header)) == [
        ("runner", 1.25),
        ("backend", 0.5),
        ("apiserver", 0.3),
    ]


def test_a_trace_gives_each_steps_duration() -> None:
    trace = [
        {"id": "pros", "kind": "model", "durationMs": 12.5},
        {"id": "join", "kind": "transform", "durationMs": 0.2},
        {"id": "bad"},
        "not an entry",
    ]
    assert list(timings.step_durations(trace)) == [("pros", 12.5), ("join", 0.2)]
    assert list(timings.step_durations(None)) == []


def test_a_streams_last_line_gives_the_runner_and_backend_hops() -> None:
    body = {"timings": {"totalMs": 9.0, "runnerMs": 2.0, "backendMs": 7.0, "firstTokenMs": 3}}
    assert list(timings.body_hops(body["timings"])) == [("runner", 2.0), ("backend", 7.0)]
    assert list(timings.body_hops({"runnerMs": True})) == []


def test_cache_counts_and_completion_tokens_come_from_the_answer() -> None:
    body = {"cache": {"hits": 2, "misses": 1}, "usage": {"completion_tokens": 17}}
    assert timings.cache_counts(body) == (2, 1)
    assert timings.completion_tokens(body) == 17
    assert timings.cache_counts({"cache": {"hits": "2"}}) is None
    assert timings.completion_tokens({}) is None


def test_a_trace_gives_its_tool_loops_turns_and_tool_calls_and_none_without_one() -> None:
    trace = [
        {"id": "solve", "durationMs": 9.0, "turns": [{}, {}, {}], "toolCalls": 2},
        {"id": "check", "durationMs": 1.0, "turns": [{}], "toolCalls": 1},
        {"id": "plain", "durationMs": 1.0},
    ]
    assert timings.agent_counts(trace) == (4, 3)
    assert timings.agent_counts([{"id": "plain", "durationMs": 1.0}]) is None
    assert timings.agent_counts(None) is None
