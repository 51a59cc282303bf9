"""Generate `plnt.json`, plnt's Grafana dashboard, from the panel list below.

    python charts/plnt/dashboards/generate.py          # rewrite plnt.json
    python charts/plnt/dashboards/generate.py --check  # exit 1 if plnt.json is stale

Hand-written as data, no SDK: the dashboard is a list of (title, unit, PromQL) and one
layout rule, and Grafana's JSON model for a time series panel is small and stable. The
committed JSON is what the chart ships (a ConfigMap for Grafana's sidecar); a test checks
it equals this script's output, and another runs every query against a real Prometheus.

Variables: `$datasource`, `$namespace` and `$workflowrun` (from the runners' labels,
multi-value with All). Rates use `$__rate_interval`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("plnt.json")
UID = "plnt-overview"
RUN = 'namespace=~"$namespace", workflowrun=~"$workflowrun"'
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    targets: tuple[tuple[str, str], ...]  # (PromQL, legend)
    description: str = ""
    kind: str = "timeseries"
    width: int = 8
    options: dict[str, Any] = field(default_factory=dict)


def quantiles(
    metric: str, by: str, selector: str = "", qs: tuple[float, ...] = (0.5, 0.95, 0.99)
) -> tuple[tuple[str, str], ...]:
    """histogram_quantile targets of `metric` (a histogram's base name) by `by`."""
    legend_by = "".join(f"{{{{{label}}}}} " for label in by.split(", "))
    return tuple(
        (
            f"histogram_quantile({q}, sum by ({by}, le) "
            f"(rate({metric}_bucket{{{selector}}}[{RATE}])))",
            f"{legend_by}p{round(q * 100)}",
        )
        for q in qs
    )


SLO_BY = "namespace, workflowrun, objective"
SLO_CALLS = f"plnt_workflowrun_slo_calls_total{{{RUN}}}"
SLO_ROWS: list[tuple[str, list[Panel]]] = [
    (
        "Service-level objectives",
        [
            Panel(
                "SLO attainment",
                "percentunit",
                (
                    (
                        f"max by (workflowrun, objective) "
                        f"(plnt_workflowrun_slo_attainment_ratio{{{RUN}}})",
                        "{{workflowrun}} {{objective}}",
                    ),
                ),
                "Share of the window's calls that met each objective (status.slo).",
            ),
            Panel(
                "SLO burn rate",
                "none",
                (
                    (
                        f"(sum by ({SLO_BY}) (rate(plnt_workflowrun_slo_calls_total{{{RUN}, "
                        f'result="bad"}}[{RATE}])) or sum by ({SLO_BY}) '
                        f"(rate({SLO_CALLS}[{RATE}])) * 0) / sum by ({SLO_BY}) "
                        f"(rate({SLO_CALLS}[{RATE}])) / on ({SLO_BY}) max by ({SLO_BY}) "
                        f"(plnt_workflowrun_slo_error_budget_ratio{{{RUN}}})",
                        "{{workflowrun}} {{objective}}",
                    ),
                ),
                "Bad calls' share over what the objective allows: 1 spends the budget over "
                "its window; the fast-burn alert pages above 14.4 (1h and 5m), the slow one "
                "tickets above 6 (6h and 30m).",
            ),
            Panel(
                "SLO error budget left",
                "percentunit",
                (
                    (
                        f"min by (workflowrun, objective) "
                        f"(plnt_workflowrun_slo_error_budget_remaining{{{RUN}}})",
                        "{{workflowrun}} {{objective}}",
                    ),
                ),
                "1 untouched, 0 spent, below 0 overspent, over the objective's window.",
            ),
        ],
    ),
]

ROWS: list[tuple[str, list[Panel]]] = [
    (
        "API server",
        [
            Panel(
                "Request rate by verb",
                "reqps",
                ((f"sum by (verb) (rate(plnt_apiserver_requests_total[{RATE}]))", "{{verb}}"),),
            ),
            Panel(
                "Request latency by verb (p99)",
                "s",
                quantiles("plnt_apiserver_request_duration_seconds", "verb", qs=(0.99,)),
                "Watches excluded.",
            ),
            Panel(
                "API errors (5xx ratio) and refusals (429/s)",
                "percentunit",
                (
                    (
                        f'(sum(rate(plnt_apiserver_requests_total{{code=~"5.."}}[{RATE}])) '
                        f"or vector(0)) / sum(rate(plnt_apiserver_requests_total[{RATE}]))",
                        "5xx ratio",
                    ),
                    (
                        f"sum(rate(plnt_apiserver_dropped_requests_total[{RATE}]))",
                        "429 per second",
                    ),
                ),
            ),
            Panel(
                "Open watches",
                "short",
                (("sum by (resource) (plnt_apiserver_open_watches)", "{{resource}}"),),
            ),
            Panel(
                "etcd latency by operation (p99)",
                "s",
                quantiles("plnt_etcd_request_duration_seconds", "operation", qs=(0.99,)),
            ),
            Panel(
                "Requests in flight",
                "short",
                (
                    (
                        "sum by (request_kind) (plnt_apiserver_current_inflight_requests)",
                        "{{request_kind}}",
                    ),
                    ("sum(plnt_apiserver_longrunning_requests)", "long-running"),
                ),
            ),
        ],
    ),
    (
        "Deploys",
        [
            Panel(
                "Deploys by result",
                "short",
                (
                    (
                        f"sum by (result) (increase(plnt_saga_deploys_total[{RATE}]))",
                        "{{result}}",
                    ),
                ),
            ),
            Panel(
                "Rollbacks",
                "short",
                (
                    (
                        "sum(increase(plnt_saga_deploys_total"
                        f'{{result=~"rolled_back|interrupted"}}[{RATE}]))',
                        "canary removed",
                    ),
                ),
                "Deploys whose canary was removed: after a failure, an abort or a newer "
                "generation.",
            ),
            Panel(
                "Saga step duration (p90)",
                "s",
                quantiles(
                    "plnt_saga_step_duration_seconds", "step", 'outcome="succeeded"', qs=(0.9,)
                ),
            ),
            Panel(
                "Activity duration (p90)",
                "s",
                quantiles("plnt_saga_activity_duration_seconds", "activity", qs=(0.9,)),
            ),
            Panel(
                "Activity retries",
                "short",
                (
                    (
                        f"sum by (activity) (increase(plnt_saga_activity_retries_total[{RATE}]))",
                        "{{activity}}",
                    ),
                ),
            ),
        ],
    ),
    (
        "Invocations",
        [
            Panel(
                "Invocation rate by run and revision",
                "reqps",
                (
                    (
                        "sum by (namespace, workflowrun, revision) "
                        f"(rate(plnt_runner_invocations_total{{{RUN}}}[{RATE}]))",
                        "{{namespace}}/{{workflowrun}} r{{revision}}",
                    ),
                ),
            ),
            Panel(
                "Invocation latency by run and revision",
                "s",
                quantiles("plnt_runner_invocation_seconds", "workflowrun, revision", RUN),
                width=16,
            ),
            Panel(
                "Invocation error rate",
                "percentunit",
                (
                    (
                        "sum by (namespace, workflowrun) (rate(plnt_runner_invocations_total"
                        f'{{{RUN}, outcome="error"}}[{RATE}])) / sum by (namespace, workflowrun) '
                        f"(rate(plnt_runner_invocations_total{{{RUN}}}[{RATE}]))",
                        "{{namespace}}/{{workflowrun}}",
                    ),
                ),
            ),
            Panel(
                "Step-cache hit rate",
                "percentunit",
                (
                    (
                        "sum by (namespace, workflowrun) (rate(plnt_runner_cache_hits_total"
                        f"{{{RUN}}}[{RATE}])) / (sum by (namespace, workflowrun) "
                        f"(rate(plnt_runner_cache_hits_total{{{RUN}}}[{RATE}])) + "
                        "sum by (namespace, workflowrun) (rate(plnt_runner_cache_misses_total"
                        f"{{{RUN}}}[{RATE}])))",
                        "{{namespace}}/{{workflowrun}}",
                    ),
                ),
            ),
            Panel(
                "Time to first token",
                "s",
                quantiles(
                    "plnt_runner_time_to_first_token_seconds", "workflowrun", RUN, qs=(0.5, 0.95)
                ),
                "Streamed invocations: from the start of the run to the first piece of output.",
            ),
            Panel(
                "Backend call latency (p95)",
                "s",
                quantiles(
                    "plnt_runner_backend_request_duration_seconds",
                    "workflowrun, kind",
                    RUN,
                    qs=(0.95,),
                ),
            ),
            Panel(
                "Tokens per second",
                "short",
                (
                    (
                        "sum by (workflowrun, type) "
                        f"(rate(plnt_runner_tokens_total{{{RUN}}}[{RATE}]))",
                        "{{workflowrun}} {{type}}",
                    ),
                ),
            ),
            Panel(
                "Runner invocations in flight",
                "short",
                (
                    (
                        f"sum by (workflowrun, revision) (plnt_runner_in_flight{{{RUN}}})",
                        "{{workflowrun}} r{{revision}}",
                    ),
                ),
            ),
        ],
    ),
    (
        "Last bench",
        [
            Panel(
                "Last bench latency",
                "s",
                (
                    (
                        "max by (workflowrun, revision, quantile) "
                        f"(plnt_bench_latency_seconds{{{RUN}}})",
                        "{{workflowrun}} {{revision}} q{{quantile}}",
                    ),
                ),
                "Client-side, per invocation, from the run's status.lastBench.",
            ),
            Panel(
                "Last bench rate",
                "reqps",
                (
                    (
                        "max by (workflowrun, revision, kind) "
                        f"(plnt_bench_rate_requests_per_second{{{RUN}}})",
                        "{{workflowrun}} {{revision}} {{kind}}",
                    ),
                ),
            ),
            Panel(
                "Last bench errors and cache hits",
                "percentunit",
                (
                    (
                        f"max by (workflowrun, revision) (plnt_bench_error_ratio{{{RUN}}})",
                        "{{workflowrun}} {{revision}} errors",
                    ),
                    (
                        f"max by (workflowrun, revision) (plnt_bench_cache_hit_ratio{{{RUN}}})",
                        "{{workflowrun}} {{revision}} cache hits",
                    ),
                ),
            ),
            Panel(
                "GPU utilisation (last bench)",
                "percentunit",
                (
                    (
                        "max by (workflowrun, revision) "
                        f"(plnt_bench_gpu_utilization_ratio{{{RUN}}})",
                        "{{workflowrun}} {{revision}}",
                    ),
                ),
                "Mean utilisation of the backend's GPUs over the bench, from the DCGM "
                "exporter its PlntBackend names; absent when it names none.",
            ),
        ],
    ),
]


def _variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": f"{name}-variable"},
        "definition": query,
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {
                "refId": chr(ord("A") + index),
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": expr,
                "legendFormat": legend,
            }
            for index, (expr, legend) in enumerate(panel.targets)
        ],
    }


def dashboard() -> dict[str, Any]:
    """The dashboard's JSON model."""
    panels: list[dict[str, Any]] = []
    next_id, y = 1, 0
    for title, row in ROWS + SLO_ROWS:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id, y, x = next_id + 1, y + 1, 0
        for panel in row:
            if x + panel.width > 24:
                x, y = 0, y + 8
            panels.append(_panel(panel, next_id, x, y))
            next_id, x = next_id + 1, x + panel.width
        y += 8
    return {
        "uid": UID,
        "title": "plnt",
        "description": (
            "plnt: API server, deploys, invocations by run and revision, last bench, SLOs."
        ),
        "tags": ["plnt"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                },
                _variable(
                    "namespace",
                    "Namespace",
                    "label_values(plnt_runner_invocations_total, namespace)",
                ),
                _variable(
                    "workflowrun",
                    "WorkflowRun",
                    'label_values(plnt_runner_invocations_total{namespace=~"$namespace"}, '
                    "workflowrun)",
                ),
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
