"""A real Prometheus scrapes a real `plnt up` through the file SD files it writes.

* Every PromQL expression of the committed Grafana dashboard parses and returns data
  (at least one finite sample) after a deploy, invocations (plain, failing, streamed, a
  cache hit), a watch and a bench result in `status.lastBench`.
* The SD files follow runners: a scale-up adds a target that Prometheus scrapes, a
  delete of the run removes its file and Prometheus drops its targets.

The bench result is written through the status subresource in the `/bench` subresource's
record form (`lastBench: {id, phase, results: [...]}`), its one result built with the
harness's `BenchResult` from invocations this test timed, the runner's cache counters
and a DCGM exporter stand-in's GPU utilisation: what a bench of this run would record.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plnt.client import errors as client_errors
from plnt.harness import BenchResult, Percentiles
from plnt.sagas.targets import local_scrape
from tests.observability.conftest import Observed, up_targets
from tests.support.llm import Gpu, threaded_llm
from tests.support.plnt_server import REPO, wait_for
from tests.support.stack import publish

DASHBOARD = REPO / "charts" / "plnt" / "dashboards" / "plnt.json"
CHAT = REPO / "examples" / "chat.workflow.yaml"
RUN = "chat"
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


def percentiles(milliseconds: list[float]) -> Percentiles:
    cuts = statistics.quantiles(milliseconds, n=100, method="inclusive")
    return Percentiles(
        count=len(milliseconds),
        p50_ms=cuts[49],
        p90_ms=cuts[89],
        p95_ms=cuts[94],
        p99_ms=cuts[98],
        max_ms=max(milliseconds),
        mean_ms=statistics.fmean(milliseconds),
    )


@pytest.fixture(scope="module")
def chat(observed: Observed) -> dict[str, Any]:
    """The chat example deployed in the module's namespace, Ready, its runner scraped."""
    ref, digest = publish(observed.state_dir / "layout", "chat", CHAT.read_text())
    body = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": RUN, "namespace": observed.namespace},
        "spec": {"workflow": {"ref": ref, "digest": digest}, "replicas": 1},
    }
    observed.api.call(lambda c: c.create_workflowrun(body, namespace=observed.namespace))
    obj = observed.api.wait_settled(observed.namespace, RUN, timeout=90)
    assert obj["status"]["phase"] == "Ready", obj["status"]

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
    # Invocations: timed ones with a repeated question (step-cache hits), a refusal.
    timed: list[float] = []
    for index in range(12):
        began = time.perf_counter()
        result = api.invoke(namespace, RUN, {"question": f"what is plnt {index % 3}?"})
        timed.append((time.perf_counter() - began) * 1000.0)
        assert "plnt" in json.dumps(result.body)
    with pytest.raises(client_errors.ApiError):
        api.invoke(namespace, RUN, {})

    async def streamed(lines: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
        return [line async for line in lines]

    lines = api.call(
        lambda c: streamed(c.invoke_stream(RUN, {"question": "stream it"}, namespace=namespace))
    )
    assert lines[-1]["type"] == "result", lines
    # A watch, so the open-watch gauge has its series.
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    api.call(lambda c: c.request("GET", path, params={"watch": "true", "timeoutSeconds": "1"}))
    after = metrics_of(runner_metrics)

    def delta(name: str) -> float:
        return after[f"{name}{{}}"] - before.get(f"{name}{{}}", 0.0)

    hits, misses = delta("plnt_runner_cache_hits_total"), delta("plnt_runner_cache_misses_total")
    assert hits > 0 and misses > 0, (hits, misses)
    with threaded_llm(None) as llm:  # the DCGM exporter beside the run's GPUs
        llm.gpus = [Gpu(utilisation=30.0, used_mib=1000, free_mib=3000), Gpu(50.0, 10, 10)]
        dcgm = metrics_of(f"{llm.root}/dcgm/metrics")
    utilisation = [v for k, v in dcgm.items() if k.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert utilisation, dcgm
    latency = percentiles(timed)
    bench = BenchResult(
        label=str(chat["status"]["revision"]),
        requested_rate=None,
        achieved_rate=len(timed) / (sum(timed) / 1000.0),
        requests=len(timed),
        duration_seconds=sum(timed) / 1000.0,
        latency=latency,
        errors={"4xx": 0, "5xx": 0, "timeout": 0, "connection": 0},
        error_rate=0.0,
        steps={"answer": latency},
        hops={},
        cache_hit_rate=hits / (hits + misses),
        cache_reason=None,
        time_to_first_token=None,
        tokens_per_second=None,
        gpu_utilization=statistics.fmean(utilisation) / 100.0,
        gpu_reason=None,
        generator_cpu_seconds=0.0,
        generator_cpu_ratio=0.0,
    )
    record = {"id": "b-observed", "phase": "Succeeded", "results": [bench.to_json()]}
    api.call(
        lambda c: c.patch_workflowrun_status(
            RUN, {"status": {"lastBench": record}}, namespace=namespace
        )
    )
    wait_for(
        lambda: observed.prometheus.query(
            f'plnt_bench_gpu_utilization_ratio{{namespace="{namespace}"}}'
        ),
        timeout=30,
        message="the bench gauges scraped",
    )
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
    # The gauge carries what was written: the GPU figure is the exporter's mean.
    [gpu] = observed.prometheus.query(
        f'plnt_bench_gpu_utilization_ratio{{namespace="{namespace}",workflowrun="{RUN}"}}'
    )
    assert float(gpu["value"][1]) == pytest.approx(0.4)


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
