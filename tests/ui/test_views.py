"""The UI's pure parts: timeline geometry, form fields and inputs, problem paths, bench chart,
step traces and the SLO card."""

from __future__ import annotations

from datetime import UTC, datetime

import markupsafe
import pytest

from plnt.ui import actions, benches, evaluations, forms, objectives, rendering, steptraces, views
from plnt.ui import invocations as invocation_views

NOW = datetime(2025, 1, 1, 12, 0, 10, tzinfo=UTC)


def test_a_timeline_puts_steps_on_one_axis_and_a_running_bar_ends_now() -> None:
    saga = [
        {"name": "pull", "state": "Succeeded", "attempts": 1,
         "startTime": "2025-01-01T12:00:00Z", "endTime": "2025-01-01T12:00:02Z"},
        {"name": "install", "state": "Running", "attempts": 2,
         "startTime": "2025-01-01T12:00:05Z"},
        {"name": "promote", "state": "Pending", "attempts": 0},
    ]  # fmt: skip
    timeline = views.timeline(saga, NOW)
    pull, install, promote = timeline.rows
    assert (pull.x, pull.width, pull.duration) == (0.0, 200.0, "2 s")
    assert (install.x, install.width, install.duration) == (500.0, 500.0, "5 s")
    assert install.attempts == 2
    assert not promote.started and promote.width == 0.0
    assert timeline.span == "10 s"


def test_the_compensation_entry_of_a_timeline_is_marked_as_such() -> None:
    saga = [
        {"name": "smoke", "state": "Failed", "startTime": "2025-01-01T12:00:00Z",
         "endTime": "2025-01-01T12:00:01Z"},
        {"name": "rollback", "state": "Compensated", "startTime": "2025-01-01T12:00:01Z",
         "endTime": "2025-01-01T12:00:02Z"},
    ]  # fmt: skip
    smoke, rollback = views.timeline(saga, NOW).rows
    assert rollback.compensation and not smoke.compensation


def test_history_is_newest_first_with_the_traffic_each_revision_takes() -> None:
    status = {
        "revision": 2,
        "history": [{"revision": 1, "digest": "a"}, {"revision": 2, "digest": "b"}],
        "traffic": [{"revision": 2, "weight": 90}, {"revision": 3, "weight": 10}],
    }
    rows = views.history(status)
    assert [(r.revision, r.current, r.weight) for r in rows] == [(2, True, 90), (1, False, None)]
    assert [(b.x, b.width) for b in views.traffic_bars(status["traffic"])] == [
        (0.0, 900.0),
        (900.0, 100.0),
    ]


def test_history_rows_name_who_signed_each_revision() -> None:
    status = {
        "history": [
            {"revision": 1, "digest": "a"},
            {"revision": 2, "digest": "b", "signedBy": "release (key sha256:0123456789abcdef)"},
        ]
    }
    rows = views.history(status)
    assert [(r.revision, r.signed_by) for r in rows] == [
        (2, "release (key sha256:0123456789abcdef)"),
        (1, ""),
    ]


def test_form_fields_follow_the_inputs_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "minLength": 1},
            "tone": {"type": "string", "enum": ["dry", "warm"], "default": "dry"},
            "n": {"type": "integer"},
            "loud": {"type": "boolean"},
            "tags": {"type": "array"},
        },
        "required": ["topic"],
    }
    fields = forms.fields(schema)
    assert [(f.name, f.widget, f.required) for f in fields] == [
        ("topic", "text", True),
        ("tone", "select", False),
        ("n", "integer", False),
        ("loud", "checkbox", False),
        ("tags", "json", False),
    ]
    assert fields[1].options == ("dry", "warm") and fields[1].default == "dry"
    values = {"topic": "", "tone": "warm", "n": "3", "loud": True, "tags": '["a"]'}
    assert forms.inputs(fields, values) == {"tone": "warm", "n": 3, "loud": True, "tags": ["a"]}
    with pytest.raises(forms.FormError) as raised:
        forms.inputs(fields, {"n": "three"})
    assert raised.value.field == "n"


@pytest.mark.parametrize(
    ("path", "field"),
    [("$.topic", "topic"), ("$.items[2].name", "items"), ("$['a b']", "a b"), ("$", "")],
)
def test_a_runner_problem_path_names_its_top_level_field(path: str, field: str) -> None:
    assert forms.field_of(path) == field


def test_the_bench_form_becomes_a_bench_spec() -> None:
    assert actions.bench_spec({"durationSeconds": "5", "concurrency": "4", "revision": ""}) == {
        "durationSeconds": 5.0,
        "concurrency": 4,
    }
    assert actions.bench_spec({"rate": "20", "concurrency": "4", "compare": "1, canary"}) == {
        "rate": 20.0,
        "compare": [1, "canary"],
    }


def test_the_latency_chart_groups_percentiles_on_one_scale() -> None:
    results = [
        {"label": "1", "latency": {"p50Ms": 10, "p90Ms": 20, "p95Ms": 30, "p99Ms": 90}},
        {"label": "2", "latency": {"p50Ms": 5, "p90Ms": 10, "p95Ms": 15, "p99Ms": 45}},
    ]
    bars, top = benches.latency_bars(results)
    assert top == 90 and len(bars) == 8
    tallest = max(bars, key=lambda bar: bar.height)
    assert (tallest.label, tallest.percentile) == ("1", "p99")
    half = next(b for b in bars if b.label == "2" and b.percentile == "p99")
    assert half.height == pytest.approx(tallest.height / 2)


def test_a_running_invocations_duration_runs_to_now_and_a_finished_ones_to_its_end() -> None:
    meta = {"name": "a", "creationTimestamp": "2025-01-01T11:59:00Z"}
    running = {
        "metadata": meta,
        "status": {"phase": "Running", "startTime": "2025-01-01T12:00:00Z"},
    }
    row = invocation_views.invocation_object_row(running, NOW)
    assert (row.duration, row.age, row.running, row.tokens) == ("10 s", "1m10s", True, "")
    finished = {
        "metadata": meta,
        "status": {"phase": "Failed", "startTime": "2025-01-01T12:00:00Z",
                   "completionTime": "2025-01-01T12:00:04Z", "error": {"reason": "Timeout"},
                   "usage": {"totalTokens": 9}},
    }  # fmt: skip
    row = invocation_views.invocation_object_row(finished, NOW)
    assert (row.duration, row.reason, row.running, row.tokens) == ("4 s", "Timeout", False, "9")


def backend_event(
    name: str, reason: str, last: str, *, kind: str = "PlntBackend", **fields: object
) -> dict[str, object]:
    return {
        "involvedObject": {"kind": kind, "name": name},
        "type": "Warning" if reason.startswith("BackendUn") else "Normal",
        "reason": reason,
        "message": f"{reason} of {name}",
        "firstTimestamp": "2025-01-01T11:00:00Z",
        "lastTimestamp": last,
        **fields,
    }


def test_each_backend_lists_its_recent_events_newest_first_with_count_and_age() -> None:
    found = views.backend_events(
        [
            backend_event("gpu-a", "BackendReachable", "2025-01-01T12:00:00Z"),
            backend_event("gpu-a", "BackendUnreachable", "2025-01-01T12:00:05Z", count=3),
            backend_event("gpu-b", "HeadroomExhausted", "2025-01-01T11:58:10Z"),
            backend_event("gpu-a", "Accepted", "2025-01-01T12:00:09Z", kind="WorkflowRun"),
        ],
        NOW,
    )
    assert set(found) == {"gpu-a", "gpu-b"}
    unreachable, reachable = found["gpu-a"]
    assert (unreachable.type, unreachable.reason, unreachable.count) == (
        "Warning",
        "BackendUnreachable",
        3,
    )
    assert unreachable.message == "BackendUnreachable of gpu-a" and unreachable.last_seen == "5s"
    assert (reachable.reason, reachable.count, reachable.last_seen) == (
        "BackendReachable",
        1,
        "10s",
    )
    assert found["gpu-b"][0].last_seen == "2m00s"


def test_a_backends_events_of_the_same_second_list_the_one_created_later_first() -> None:
    same_second = "2025-01-01T12:00:05Z"
    found = views.backend_events(
        [
            backend_event("gpu-a", "BackendReachable", same_second),
            backend_event("gpu-a", "BackendUnreachable", same_second),
        ],
        NOW,
    )
    assert [e.reason for e in found["gpu-a"]] == ["BackendUnreachable", "BackendReachable"]


def test_a_backends_events_are_cut_to_the_most_recent_and_series_counts_win() -> None:
    events = [
        backend_event("gpu-a", f"R{i}", f"2025-01-01T12:00:0{i}Z") for i in range(8)
    ] + [
        backend_event(
            "gpu-a", "Series", "2025-01-01T11:00:00Z",
            series={"count": 7, "lastObservedTime": "2025-01-01T12:00:09Z"},
        )
    ]  # fmt: skip
    shown = views.backend_events(events, NOW, shown=3)["gpu-a"]
    assert [e.reason for e in shown] == ["Series", "R7", "R6"]
    assert shown[0].count == 7


def test_the_run_page_shows_each_cases_answers_canary_beside_stable_with_scores() -> None:
    record = {
        "revision": 2,
        "stableRevision": 1,
        "passed": False,
        "message": "evaluation failed: next pass rate 0.00 < min 1.00; stable 1.00 (0/1)",
        "durationMilliseconds": 2100.0,
        "scorers": [
            {"name": "next", "type": "regex", "checks": 1, "canaryPassRate": 0.0,
             "stablePassRate": 1.0, "minPassRate": 1.0, "maxRegression": 0.0, "passed": False},
            {"name": "judge", "type": "judge", "checks": 1, "winRate": 0.5, "wins": 0,
             "ties": 1, "losses": 0, "minWinRate": 0.5, "passed": True},
        ],
        "judges": [{"scorer": "judge", "backend": "j", "model": "m", "rubric": "<b>count</b>",
                    "temperature": 0.0}],
        "cases": [
            {"name": "after-4",
             "canary": {"output": " the <list>", "scores": [
                 {"scorer": "next", "passed": False, "detail": "no match"}]},
             "stable": {"output": {"n": 5}, "scores": [{"scorer": "next", "passed": True}]},
             "judgements": [{"scorer": "judge", "canaryFirst": "canary",
                             "stableFirst": "stable", "outcome": "tie"}]},
        ],
    }  # fmt: skip
    template = rendering.environment().get_template("run_evaluation.html")
    html = template.render(evaluation=evaluations.evaluation_view(record))
    assert 'data-testid="evaluation"' in html and "failed" in html
    assert "beside stable r1" in html and str(markupsafe.escape(record["message"])) in html
    case = html[html.index('data-case="after-4"') :]
    canary, stable = case.index('data-testid="canary"'), case.index('data-testid="stable"')
    assert canary < case.index("the &lt;list&gt;") < stable  # escaped, in the canary's cell
    assert stable < case.index("✓ next") and case.index("✗ next") < stable
    assert "{&#34;n&#34;: 5}" in case or '{"n": 5}' in case  # JSON output as JSON
    assert "judge: tie" in case and "&lt;b&gt;count&lt;/b&gt;" in html
    assert "No evaluation has run" in template.render(evaluation=evaluations.evaluation_view(None))


def test_a_scorer_gated_by_its_pass_rate_alone_shows_no_regression_limit() -> None:
    record = {
        "passed": True,
        "message": "ok",
        "scorers": [
            {"name": "has", "type": "contains", "checks": 2, "canaryPassRate": 1.0,
             "minPassRate": 0.9, "passed": True, "message": "ok"},
            {"name": "both", "type": "regex", "checks": 2, "canaryPassRate": 1.0,
             "minPassRate": 0.9, "maxRegression": 0.0, "passed": True, "message": "ok"},
        ],
    }  # fmt: skip
    template = rendering.environment().get_template("run_evaluation.html")
    html = template.render(evaluation=evaluations.evaluation_view(record))
    alone = html[html.index('data-scorer="has"') : html.index('data-scorer="both"')]
    assert "≥ 0.90" in alone and "regression" not in alone
    assert "≥ 0.90, regression ≤ 0.00" in html[html.index('data-scorer="both"') :]


def test_a_bench_that_bypassed_the_step_cache_says_so_beside_its_hit_rate() -> None:
    result = {"label": "stable", "requests": 14, "cacheHitRate": 0.0}
    for cache, shown in (("bypass", "0% (bypassed)"), ("use", "0%"), (None, "0%")):
        target = {"label": "stable", "revision": 1, **({"cache": cache} if cache else {})}
        bench = {"id": "bench-1", "phase": "Succeeded", "results": [result], "targets": [target]}
        view = benches.bench_view(bench)
        assert view is not None and view.results[0].cache_hits == shown


def test_a_tool_loops_trace_shows_each_turn_and_call_with_its_outcome() -> None:
    entry = {
        "id": "agent", "kind": "model", "durationMs": 812.25, "backendMs": 700, "attempts": 1,
        "cache": "off", "toolCalls": 3, "invalidToolCalls": 1,
        "turns": [
            {"turn": 1, "startedMs": 0, "durationMs": 400, "modelMs": 350.5, "final": False,
             "usage": {"prompt_tokens": 120, "completion_tokens": 30},
             "toolCalls": [
                 {"id": "c0", "name": "add", "arguments": '{"a": 2}', "startedMs": 351,
                  "durationMs": 12, "ok": True, "resumed": True},
                 {"id": "c1", "name": "nope", "startedMs": 351, "durationMs": 0, "ok": False,
                  "invalid": True, "error": "unknown tool 'nope'"},
                 {"id": "c2", "name": "broken", "startedMs": 351, "durationMs": 3, "ok": False,
                  "error": "HTTP 500"},
             ]},
            {"turn": 2, "startedMs": 400, "durationMs": 412, "modelMs": 410, "final": True,
             "toolCalls": []},
        ],
    }  # fmt: skip
    step = steptraces.step_row(entry)
    assert step.agent and step.tool_calls == 3 and step.invalid_tool_calls == 1
    first, last = step.turns
    assert first.tokens == "120 + 30 = 150 tokens" and first.model == "350.5 ms"
    assert [c.outcome for c in first.calls] == ["ok", "invalid", "error"]
    assert first.calls[0].arguments == '{"a": 2}' and first.calls[0].resumed
    assert first.calls[1].error == "unknown tool 'nope'"
    assert last.final and not first.final and last.calls == ()


def test_a_maps_items_and_a_skipped_steps_reason_are_read_and_junk_is_left_out() -> None:
    rows = steptraces.step_rows(
        [
            {"id": "each", "kind": "http", "items": 4,
             "failedItems": [{"index": 2, "error": "HTTP 503"}, "junk"]},
            {"id": "maybe", "kind": "model", "skipped": "`when` is False: inputs.deep"},
            "not a step",
        ]
    )  # fmt: skip
    each, maybe = rows
    assert each.items == 4 and [(f.index, f.error) for f in each.failed_items] == [(2, "HTTP 503")]
    assert not each.agent and not each.skipped
    assert maybe.skipped and maybe.skipped_because == "`when` is False: inputs.deep"
    assert maybe.items is None and maybe.turns == ()


def test_the_slo_card_lists_the_specs_objectives_beside_what_was_measured() -> None:
    spec = {"timeToFirstToken": {"percentile": 95, "milliseconds": 500}, "maxErrorRate": 0.01,
            "maxCostPerMillionTokens": 2.0, "windowSeconds": 1800}  # fmt: skip
    status = {
        "windowSeconds": 1800, "calls": 40, "met": False, "errorBudgetRemaining": -0.5,
        "objectives": [
            {"name": "timeToFirstToken", "objective": 500, "percentile": 95, "measured": 612.0,
             "attainment": 0.925, "met": False, "budgetRemaining": -0.5, "samples": 40},
            {"name": "errorRate", "objective": 0.01, "measured": 0.0, "attainment": 1.0,
             "met": True, "budgetRemaining": 1.0, "samples": 40},
        ],
        "cost": {"currency": "USD", "amount": 0.0021, "basis": "tokens", "inputTokens": 9000,
                 "outputTokens": 3000, "perMillionTokens": 0.175},
        "backend": "gemma",
    }  # fmt: skip
    view = objectives.slo_view(spec, status)
    assert view is not None and not view.no_calls and view.window == "30 min"
    ttft, errors, cost = view.objectives
    assert (ttft.objective, ttft.measured, ttft.met) == ("p95 ≤ 500 ms", "612 ms", False)
    assert (errors.objective, errors.measured, errors.met) == (
        "≤ 1% of calls fail",
        "0% failed",
        True,
    )
    assert cost.objective == "≤ 2 per M tokens" and cost.met is None and cost.measured == "—"
    assert view.cost is not None and view.cost.per_million_tokens == 0.175


def test_the_slo_card_says_no_calls_yet_before_any_and_is_absent_without_objectives() -> None:
    view = objectives.slo_view({"latency": {"milliseconds": 8000}}, None)
    assert view is not None and view.no_calls and view.window == "1 h"
    assert view.objectives[0].objective == "p95 ≤ 8000 ms"
    assert objectives.slo_view({"windowSeconds": 60}, {"calls": 3}) is None
    assert objectives.slo_view(None, None) is None
