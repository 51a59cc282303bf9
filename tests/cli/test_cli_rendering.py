"""The pure parts of the CLI: when a deploy is over, step lines, inputs, columns."""

from __future__ import annotations

import io
from typing import Any

import pytest

from plnt.cli import bench as cli_bench
from plnt.cli import invoking, printing, progress


def run(generation: int, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "generation": generation}, "status": status}


def condition(kind: str, value: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": kind, "status": value, "reason": reason, "message": message}


def test_a_status_for_an_older_generation_never_ends_the_wait() -> None:
    assert progress.outcome(run(2, phase="Ready", observedGeneration=1), 2) is None


def test_ready_for_the_applied_generation_is_success() -> None:
    result = progress.outcome(run(1, phase="Ready", observedGeneration=1, revision=3), 1)
    assert result is not None and result.succeeded


def test_a_rolled_back_deploy_is_a_failure_even_though_the_old_revision_is_ready() -> None:
    status = {
        "phase": "Ready",
        "observedGeneration": 2,
        "conditions": [condition("Ready", "True", "RolledBack", "smoke failed; revision 1 serves")],
    }
    assert progress.outcome(run(2, **status), 2) == progress.Outcome(
        False, "smoke failed; revision 1 serves"
    )


def test_degraded_reports_the_degraded_message_before_the_ready_one() -> None:
    status = {
        "phase": "Degraded",
        "observedGeneration": 1,
        "conditions": [
            condition("Ready", "True", "RolledBack", "ready message"),
            condition("Degraded", "True", "CanaryFailed", "p95 above 200ms"),
        ],
    }
    assert progress.outcome(run(1, **status), 1) == progress.Outcome(False, "p95 above 200ms")


def test_steps_in_progress_keep_the_wait_going() -> None:
    assert progress.outcome(run(1, phase="SmokeTesting", observedGeneration=1), 1) is None


def test_an_aborted_first_deploy_is_a_failure() -> None:
    status = {
        "phase": "Pending",
        "observedGeneration": 1,
        "conditions": [condition("Progressing", "False", "Aborted", "deploy aborted")],
    }
    assert progress.outcome(run(1, **status), 1) == progress.Outcome(False, "deploy aborted")


def test_a_step_line_shows_state_attempts_duration_and_message() -> None:
    step = {
        "name": "canary",
        "state": "Failed",
        "attempts": 3,
        "startTime": "2020-01-01T00:00:00Z",
        "endTime": "2020-01-01T00:02:05Z",
        "message": "runner did not become ready",
    }
    assert (
        progress.step_line(step)
        == "✗  canary  Failed  attempt 3  2m5s  runner did not become ready"
    )


def test_inputs_from_a_file_are_overridden_by_pairs_whose_values_may_be_json() -> None:
    parsed = invoking.parse_inputs('{"a": 1, "b": "x"}', ["b=y", "n=3", "flags=[1,2]", "s=a=b"])
    assert parsed == {"a": 1, "b": "y", "n": 3, "flags": [1, 2], "s": "a=b"}


@pytest.mark.parametrize(("text", "pairs"), [("[1]", []), ("{", []), (None, ["novalue"])])
def test_bad_inputs_are_refused(text: str | None, pairs: list[str]) -> None:
    with pytest.raises(ValueError):
        invoking.parse_inputs(text, pairs)


def test_columns_are_aligned_and_empty_cells_show_none() -> None:
    assert printing.columns(["Name", "Phase"], [["a", None], ["long-name", "Ready"]]) == (
        "NAME        PHASE\na           <none>\nlong-name   Ready"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (125, "2m5s"), (900, "15m"), (3 * 3600 + 60, "3h1m"), (30 * 3600, "1d6h")],
)
def test_durations_read_like_kubectl(seconds: float, text: str) -> None:
    assert printing.human_duration(seconds) == text


def test_bench_results_written_to_a_pipe_keep_every_column_whole() -> None:
    """rich cuts a table to 80 columns when stdout is not a terminal (`REV…`, `(GOT / ASK…`)."""
    result = {
        "requests": 1200,
        "achievedRate": 39.9,
        "latency": {"p50Ms": 12.3, "p90Ms": 20.1, "p95Ms": 25.0, "p99Ms": 40.2, "maxMs": 80.9},
        "errors": {"timeout": 2},
        "errorRate": 0.0017,
        "cacheHitRate": 0.5,
        "gpuReason": "no GPU metrics",
    }
    bench = {
        "metadata": {"name": "bench-fanout-1"},
        "status": {
            "phase": "Succeeded",
            "targets": [{"revision": 12, "role": "canary"}, {"revision": 11, "role": "stable"}],
            "results": [result, result],
        },
    }
    out = io.StringIO()
    console = cli_bench.output_console(out)
    console.print(cli_bench.results_table(bench))
    text = out.getvalue()
    assert "…" not in text
    header = next(line for line in text.splitlines() if "REVISION" in line)
    for column in ("REQUESTS", "REQ/S (GOT / ASKED)", "P99", "ERRORS", "CACHE HITS", "GPU"):
        assert column in header
    assert max(len(line) for line in text.splitlines()) > 80


def test_a_streamed_bench_prints_time_to_first_token_and_tokens_per_second() -> None:
    def result(first_token_ms: float | None, rate: float | None) -> dict[str, Any]:
        found: dict[str, Any] = {"requests": 8, "latency": {"p50Ms": 900.0}}
        if first_token_ms is not None:
            found["timeToFirstToken"] = {"p50Ms": first_token_ms}
        found["tokensPerSecond"] = rate
        return found

    def printed(results: list[dict[str, Any]]) -> list[str]:
        bench = {
            "metadata": {"name": "b"},
            "status": {"targets": [{"revision": 2}, {"revision": 1}], "results": results},
        }
        out = io.StringIO()
        cli_bench.output_console(out).print(cli_bench.results_table(bench))
        return out.getvalue().splitlines()

    lines = printed([result(171.5, 21.25), result(None, None)])
    header = next(line for line in lines if "REVISION" in line)
    assert header.index("MAX") < header.index("TTFT P50") < header.index("TOK/S")
    assert header.index("TOK/S") < header.index("ERRORS")
    streamed_row = next(line for line in lines if "(r2)" in line)
    assert "171.5 ms" in streamed_row and "21.2" in streamed_row
    plain = printed([result(None, None), result(None, None)])
    assert "TTFT P50" not in "".join(plain)  # a bench that did not stream: no empty columns


def test_details_show_the_usage_and_whether_plnt_counted_it() -> None:
    def body(source: str) -> dict[str, Any]:
        return {"usage": {"prompt_tokens": 7, "completion_tokens": 16, "source": source}}

    counted = invoking.InvokeResult(body("counted"), "1", "miss", ())
    assert "usage: 7 prompt + 16 completion tokens (counted)" in (
        invoking.details_text(counted).splitlines()
    )
    none = invoking.InvokeResult({"output": "x"}, "1", "miss", ())
    assert not any(line.startswith("usage:") for line in invoking.details_text(none).splitlines())


def test_a_bench_table_says_whether_it_measured_the_model_or_the_step_cache() -> None:
    result = {"requests": 10, "latency": {"p50Ms": 900.0}, "cacheHitRate": 0.0}
    cached = {**result, "cacheHitRate": 0.97}
    bench = {
        "metadata": {"name": "bench-complete-1"},
        "status": {
            "phase": "Succeeded",
            "targets": [
                {"label": "stable", "revision": 1, "cache": "bypass", "url": "http://r/invoke"},
                {"label": "2", "revision": 2, "cache": "use", "url": "http://s/invoke"},
            ],
            "results": [result, cached],
        },
    }
    out = io.StringIO()
    cli_bench._print_results(cli_bench.output_console(out), bench)
    lines = out.getvalue().splitlines()
    stable = next(line for line in lines if "stable (r1)" in line and "│" in line)
    second = next(line for line in lines if "revision 2" in line and "│" in line)
    assert "0.0% (bypassed)" in stable
    assert "97.0%" in second and "bypassed" not in second
    assert any(line.endswith("step cache bypassed)") for line in lines)
    assert any(line.endswith("step cache used)") for line in lines)


def test_invocation_logs_show_an_agents_turns_and_tool_calls_and_a_skipped_step() -> None:
    from plnt.cli import invocation_objects

    call = {"id": "c0", "name": "add", "startedMs": 1.0, "durationMs": 2.5, "ok": True}
    bad = {"id": "c1", "name": "add", "startedMs": 1.0, "durationMs": 0.0, "ok": False}
    bad |= {"invalid": True, "error": "invalid arguments: 'a' is a required property"}
    turns = [
        {"turn": 1, "modelMs": 40.0, "final": False, "toolCalls": [call, bad],
         "usage": {"total_tokens": 15}, "resumed": True},
        {"turn": 2, "modelMs": 41.0, "final": True, "toolCalls": []},
    ]  # fmt: skip
    trace = [
        {"id": "route", "skipped": "`when` is False: inputs.go"},
        {"id": "solve", "durationMs": 90.0, "attempts": 1, "cache": "off", "turns": turns,
         "toolCalls": 2},
        {"id": "each", "durationMs": 5.0, "attempts": 1, "cache": "off", "items": 3,
         "failedItems": [{"index": 1, "error": "x"}]},
    ]  # fmt: skip
    text = invocation_objects.trace_text({"status": {"trace": trace}}, [])
    lines = text.splitlines()
    assert lines[0] == "- route  skipped (`when` is False: inputs.go)"
    assert lines[1].startswith("✓ solve  90.0 ms  attempt 1  2 turns, 2 tool calls")
    assert lines[2] == "    turn 1  model 40.0 ms  15 tokens  resumed"
    assert lines[3] == "      ↳ add  2.5 ms  ok"
    assert lines[4].startswith("      ↳ add  0.0 ms  invalid: invalid arguments")
    assert lines[5] == "    turn 2  model 41.0 ms  answered"
    assert lines[6].endswith("3 items, 1 failed")


def test_bench_results_of_an_agent_show_turns_and_tool_calls_per_call() -> None:
    result = {
        "requests": 10,
        "achievedRate": 2.0,
        "latency": {"p50Ms": 200.0},
        "errors": {},
        "errorRate": 0.0,
        "agent": {"turnsPerCall": 4.0, "toolCallsPerCall": 3.5},
    }
    plain = {key: value for key, value in result.items() if key != "agent"}
    bench = {
        "metadata": {"name": "bench-agent-1"},
        "status": {"targets": [{"revision": 2}, {"revision": 1}], "results": [result, plain]},
    }
    out = io.StringIO()
    cli_bench.output_console(out).print(cli_bench.results_table(bench))
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if "REVISION" in line)
    assert "TURNS/CALL" in header and "TOOL CALLS/CALL" in header
    rows = [line for line in lines if "(r2)" in line or "(r1)" in line]
    assert "4.0" in rows[0] and "3.5" in rows[0]
    assert "4.0" not in rows[1] and rows[1].count(" - ") >= 2  # no tool loop: dashes
