"""`plnt status`'s SLO section and the `kubectl get -o wide` SLO column, from status.slo."""

from __future__ import annotations

import io
from typing import Any

from plnt.api import benchattainment
from plnt.cli import bench as cli_bench
from plnt.cli import reports
from plnt.registry.workflowruns.definition import DEFINITION, slo_summary

STATUS_SLO: dict[str, Any] = {
    "windowSeconds": 3600,
    "calls": 40,
    "met": False,
    "errorBudgetRemaining": -1.5,
    "objectives": [
        {"name": "timeToFirstToken", "objective": 500.0, "percentile": 95.0, "measured": 120.0,
         "attainment": 1.0, "met": True, "budgetRemaining": 1.0, "samples": 40},
        {"name": "timePerOutputToken", "objective": 20.0, "percentile": 90.0, "measured": 31.5,
         "attainment": 0.75, "met": False, "budgetRemaining": -1.5, "samples": 40},
    ],
    "cost": {"currency": "USD", "amount": 0.0123, "basis": "tokens", "inputTokens": 100,
             "outputTokens": 900, "perMillionTokens": 12.3},
}  # fmt: skip
RUN: dict[str, Any] = {
    "metadata": {"name": "chat", "namespace": "default", "generation": 1},
    "spec": {"workflow": {"ref": "oci://r/chat:1"}, "slo": {"latency": {"milliseconds": 1}}},
    "status": {"slo": STATUS_SLO},
}


def test_status_shows_each_objective_measured_against_it_with_budget_and_cost() -> None:
    text = reports.status_text(RUN, [])
    assert "SLO:         MISSED over 40 calls in 3600s, error budget left -150%" in text
    [row] = [line for line in text.splitlines() if "timePerOutputToken" in line]
    assert row.split() == ["timePerOutputToken", "p90", "31.5", "20", "75.0%", "-150%", "MISSED"]
    assert "Cost:        0.0123 USD over the window (tokens, 12.3 per million tokens)" in text


def test_status_without_objectives_has_no_slo_section() -> None:
    run = {**RUN, "spec": {"workflow": {"ref": "x"}}}
    assert "SLO:" not in reports.status_text(run, [])


def test_the_wide_column_names_missed_objectives_and_the_budget_left() -> None:
    assert slo_summary(RUN) == "missed timePerOutputToken (budget -150%)"
    idle = {"status": {"slo": {"calls": 0, "windowSeconds": 60, "objectives": []}}}
    assert slo_summary(idle) == "no calls"
    assert slo_summary({"status": {}}) is None
    column = next(c for c in DEFINITION.columns if c.name == "SLO")
    assert column.priority == 1


def test_a_bench_prints_attainment_beside_each_percentile_when_the_run_has_objectives() -> None:
    slo = {
        "latency": {"percentile": 95, "milliseconds": 150},
        "timeToFirstToken": {"milliseconds": 80},
    }
    objectives = benchattainment.objectives(slo)
    slow = {"p50Ms": 100.0, "p90Ms": 140.0, "p95Ms": 310.0, "p99Ms": 330.0, "maxMs": 340.0}
    fast = {"p50Ms": 20.0, "p90Ms": 30.0, "p95Ms": 35.0, "p99Ms": 40.0, "maxMs": 60.0}
    first = {"p50Ms": 50.0, "p90Ms": 70.0, "p95Ms": 75.0, "p99Ms": 90.0, "maxMs": 95.0}
    bench = {
        "metadata": {"name": "b"},
        "status": {
            "targets": [{"label": "canary", "revision": 2}, {"label": "stable", "revision": 1}],
            "results": [
                {"requests": 40, "latency": slow, "timeToFirstToken": first},
                {"requests": 40, "latency": fast, "tokensPerSecond": 12.0},
            ],
        },
    }
    out = io.StringIO()
    console = cli_bench.output_console(out)
    console.print(cli_bench.results_table(bench, objectives))
    for line in cli_bench.attainment_lines(bench, objectives):
        console.print(line)
    lines = out.getvalue().splitlines()
    canary = next(line for line in lines if "canary (r2)" in line and "ms" in line)
    assert "140.0 ms ✓" in canary and "310.0 ms ✗" in canary and "50.0 ms ✓" in canary
    stable = next(line for line in lines if "stable (r1)" in line and "ms" in line)
    assert "60.0 ms ✓" in stable and "✗" not in stable
    assert "SLO latency ≤ 150 ms at p95: canary (r2) 90-95% MISSED; stable (r1) 100% met" in lines
    assert (
        "SLO timeToFirstToken ≤ 80 ms at p95: canary (r2) 95-99% met; stable (r1) not measured"
        in lines
    )
    plain = io.StringIO()
    cli_bench.output_console(plain).print(cli_bench.results_table(bench))
    assert "✓" not in plain.getvalue() and "✗" not in plain.getvalue()  # no objectives, no marks
