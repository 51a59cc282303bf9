"""A real Prometheus scrapes a real `plnt up` through the file SD files it writes.

* Every PromQL expression of the committed Grafana dashboard parses and returns data
  (at least one finite sample) after a deploy, invocations (plain, failing, streamed, a
  cache hit), a watch and a real bench (`POST …/workflowruns/NAME/bench`, 2 s, run by
  `plnt up`'s in-process worker) whose result lands in `status.lastBench`.
* The SD files follow runners: a scale-up adds a target that Prometheus scrapes, a
  delete of the run removes its file and Prometheus drops its targets.

The run's backend is a PlntBackend of type vllm whose endpoint is the OpenAI-compatible
stand-in of `tests/support/llm.py` (no GPU or model server here) and whose
`metricsEndpoint` is the DCGM exporter stand-in beside it: the bench reads GPU
utilisation from there as it would from `dcgm-exporter`, so the GPU panel shows what a
bench measured, not a value written by the test.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plnt.client import errors as client_errors
from plnt.sagas.targets import local_scrape
from tests.support.llm import LLM, Gpu, threaded_llm
from tests.support.plnt_server import REPO, wait_for
from tests.support.prometheus import Observed, up_targets
from tests.support.stack import publish

DASHBOARD = REPO / "charts" / "plnt" / "dashboards" / "plnt.json"
CHAT = REPO / "examples" / "chat.workflow.yaml"
RUN = "chat"
BACKEND = "gpu"
GPUS = [Gpu(utilisation=30.0, used_mib=1000, free_mib=3000), Gpu(50.0, 10, 10)]
"""What the DCGM stand-in reports for the backend's two GPUs: 40 % on average."""
RATE_WINDOW = "5m"
"""`$__rate_interval` in the queries: longer than the module, so every rate covers it all."""


def dashboard_queries() -> list[str]:
    """Every `expr` of every panel (rows included) of the committed dashboard."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                found.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return found


def concrete(expr: str, namespace: str) -> str:
    """The query with Grafana's variables replaced as Grafana would for this run."""
    text = expr.replace("$__rate_interval", RATE_WINDOW)
    text = text.replace("$namespace", namespace).replace("$workflowrun", RUN)
    assert "$" not in text, f"a variable left in {text!r}"
    return text


def finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


def metrics_of(url: str) -> dict[str, float]:
    """A runner's (or exporter's) /metrics as {sample name with labels: value}."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}"] = sample.value
    return values


@pytest.fixture(scope="module")
def llm() -> Iterator[LLM]:
    """The backend: an OpenAI-compatible stand-in with a DCGM exporter beside it."""
    with threaded_llm(None) as served:
        served.gpus = list(GPUS)
        yield served


@pytest.fixture(scope="module")
def chat(observed: Observed, llm: LLM) -> dict[str, Any]:
    """The chat example deployed in the module's namespace on the stand-in backend, Ready,
    its runner scraped."""
    namespace = observed.namespace
    backend = {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": BACKEND, "namespace": namespace},
        "spec": {
            "type": "vllm",
            "endpoint": llm.url,
            "metricsEndpoint": f"{llm.root}/dcgm/metrics",
            "models": ["stand-in"],
        },
    }
    backends = f"/apis/plnt.work/v1/namespaces/{namespace}/plntbackends"
    observed.api.call(lambda c: c.request("POST", backends, json=backend))
    ref, digest = publish(observed.state_dir / "layout", "chat", CHAT.read_text())
    body = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": RUN, "namespace": namespace},
        "spec": {
            "workflow": {"ref": ref, "digest": digest},
            "replicas": 1,
            "backend": {"name": BACKEND},
            # Generous objectives: their series feed the SLO panels and the chart's rules.
            "slo": {
                "latency": {"percentile": 95, "milliseconds": 30000},
                "timeToFirstToken": {"percentile": 95, "milliseconds": 10000},
            },
        },
    }
    observed.api.call(lambda c: c.create_workflowrun(body, namespace=namespace))
    obj = observed.api.wait_settled(namespace, RUN, timeout=90)
    assert obj["status"]["phase"] == "Ready", obj["status"]
    assert obj["status"]["backend"] == BACKEND

    def runner_scraped() -> bool:
        mine = [
            t
            for t in up_targets(observed.prometheus, local_scrape.RUNNER_JOB)
            if t["labels"].get("workflowrun") == RUN
            and t["labels"].get("namespace") == observed.namespace
        ]
        selector = f'plnt_runner_in_flight{{workflowrun="{RUN}"}}'
        return bool(mine) and bool(observed.prometheus.query(selector))

    wait_for(runner_scraped, timeout=30, message="Prometheus scraping the chat runner")
    return obj


def test_every_dashboard_query_parses_and_returns_data(
    observed: Observed, chat: dict[str, Any]
) -> None:
    api, namespace = observed.api, observed.namespace
    runner_metrics = f"{chat['status']['endpoint']}/metrics"
    before = metrics_of(runner_metrics)
    # Invocations: a repeated question (step-cache hits), a refusal.
    for index in range(12):
        result = api.invoke(namespace, RUN, {"question": f"what is plnt {index % 3}?"})
        assert "plnt" in json.dumps(result.body)
    with pytest.raises(client_errors.ApiError):
        api.invoke(namespace, RUN, {})

    async def streamed(lines: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
        return [line async for line in lines]

    lines = api.call(
        lambda c: streamed(c.invoke_stream(RUN, {"question": "stream it"}, namespace=namespace))
    )
    assert lines[-1]["type"] == "result", lines
    assert any(line["type"] == "delta" for line in lines), lines  # the backend streamed
    # A watch, so the open-watch gauge has its series.
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    api.call(lambda c: c.request("GET", path, params={"watch": "true", "timeoutSeconds": "1"}))
    after = metrics_of(runner_metrics)

    def delta(name: str) -> float:
        return after[f"{name}{{}}"] - before.get(f"{name}{{}}", 0.0)

    hits, misses = delta("plnt_runner_cache_hits_total"), delta("plnt_runner_cache_misses_total")
    assert hits > 0 and misses > 0, (hits, misses)

    # A real bench, run by plnt up's worker; its result lands in status.lastBench.
    bench = {
        "apiVersion": "plnt.work/v1",
        "kind": "Bench",
        "spec": {
            "durationSeconds": 2,
            "rate": 10,
            "inputs": [{"question": "bench one"}, {"question": "bench two"}],
            "cache": "use",  # the cache hit rate is among what this test reads
        },
    }
    started = api.call(lambda c: c.request("POST", f"{path}/{RUN}/bench", json=bench))
    assert started.status == 202
    bench_id = started.json()["metadata"]["name"]

    def recorded(obj: dict[str, Any]) -> bool:
        last = (obj.get("status") or {}).get("lastBench") or {}
        return bool(last.get("id") == bench_id)

    run = api.wait(namespace, RUN, recorded, timeout=60, message="the bench in lastBench")
    last = run["status"]["lastBench"]
    assert last["phase"] == "Succeeded", last
    [result] = last["results"]
    assert result["requests"] > 0 and result["errorRate"] == 0, result
    assert result["cacheHitRate"] is not None and result["cacheHitRate"] > 0, result
    # GPU from the backend's metrics endpoint (percent, as DCGM reports it).
    assert result["gpuReason"] is None, result
    assert result["gpuUtilization"] == pytest.approx(40.0)
    wait_for(
        lambda: observed.prometheus.query(
            f'plnt_bench_gpu_utilization_ratio{{namespace="{namespace}"}}'
        ),
        timeout=30,
        message="the bench gauges scraped",
    )
    wait_for(  # status.slo is judged every 10 s from the calls above
        lambda: observed.prometheus.query(
            f'plnt_workflowrun_slo_error_budget_remaining{{namespace="{namespace}"}}'
        ),
        timeout=40,
        message="status.slo's gauges scraped",
    )
    # Calls after the SLO counters were first scraped: a rate needs an increase to see.
    for index in range(3):
        api.invoke(namespace, RUN, {"question": f"after {index}"})
    queries = dashboard_queries()
    assert len(queries) >= 20
    failures: dict[str, str] = {}
    for expr in queries:
        text = concrete(expr, namespace)
        try:
            wait_for(
                lambda text=text: finite(observed.prometheus.query(text)),
                timeout=10,
                interval=0.5,
                message=text,
            )
        except AssertionError as error:
            failures[text] = str(error)
    assert not failures, "queries without data:\n" + "\n".join(failures)
    # The gauge carries what the bench measured: the exporter's mean, as a ratio.
    [gpu] = observed.prometheus.query(
        f'plnt_bench_gpu_utilization_ratio{{namespace="{namespace}",workflowrun="{RUN}"}}'
    )
    assert float(gpu["value"][1]) == pytest.approx(0.4)


def test_the_charts_slo_rules_load_and_record_every_runs_burn_rate(
    observed: Observed, chat: dict[str, Any]
) -> None:
    groups = observed.prometheus.rule_groups()
    names = {group["name"] for group in groups}
    assert {"plnt-slo-recording", "plnt-slo-alerts"} <= names, names
    unhealthy = [
        (rule["name"], rule.get("lastError"))
        for group in groups
        for rule in group["rules"]
        if rule.get("health") not in ("ok", "unknown")
    ]
    assert not unhealthy, unhealthy
    for _ in range(3):  # (runs after the dashboard test, before the run is deleted)
        observed.api.invoke(observed.namespace, RUN, {"question": "burn?"})
    selector = f'{{namespace="{observed.namespace}",workflowrun="{RUN}",objective="latency"}}'
    recorded = f"plnt_workflowrun_objective:slo_burn_rate:5m{selector}"
    burn = wait_for(  # NaN (no calls yet in its window) until the scrape sees the calls
        lambda: (found := observed.prometheus.query(recorded)) and finite(found) and found,
        timeout=40,
        interval=0.5,
        message="the recorded 5m burn rate of the run's latency objective",
    )
    assert float(burn[0]["value"][1]) == 0.0  # every call met a 30 s objective
    alerts = observed.prometheus.query(f'ALERTS{{namespace="{observed.namespace}"}}')
    assert alerts == []


def test_the_sd_files_follow_runners_coming_and_going(
    observed: Observed, chat: dict[str, Any]
) -> None:
    api, namespace, prometheus = observed.api, observed.namespace, observed.prometheus
    uid = chat["metadata"]["uid"]
    sd_dir = local_scrape.targets_dir(observed.state_dir)
    sd_file = sd_dir / f"run-{namespace}_{RUN}_{uid}.json"

    def groups() -> list[dict[str, Any]]:
        return json.loads(sd_file.read_text()) if sd_file.exists() else []

    def scraped() -> set[str]:
        return {
            t["labels"]["replica"]
            for t in up_targets(prometheus, local_scrape.RUNNER_JOB)
            if t["labels"].get("namespace") == namespace
        }

    assert [g["labels"]["replica"] for g in groups()] == ["0"]
    api.call(lambda c: c.scale_workflowrun(RUN, 2, namespace=namespace))
    wait_for(lambda: len(groups()) == 2, timeout=60, message="a second runner in the SD file")
    wait_for(lambda: scraped() == {"0", "1"}, timeout=30, message="both runners scraped")
    labels = [g["labels"] for g in groups()]
    assert all(
        (label["job"], label["namespace"], label["workflowrun"], label["revision"])
        == ("plnt-runner", namespace, RUN, str(chat["status"]["revision"]))
        for label in labels
    ), labels
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{RUN}"
    api.call(lambda c: c.request("DELETE", path))
    wait_for(lambda: not sd_file.exists(), timeout=60, message="the run's SD file removed")
    wait_for(
        lambda: not any(t["labels"].get("namespace") == namespace for t in prometheus.targets()),
        timeout=30,
        message="Prometheus dropping the run's targets",
    )
    # The API server's own file stays.
    assert (sd_dir / "plnt.json").exists()
