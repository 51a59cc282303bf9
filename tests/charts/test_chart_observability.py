"""charts/plnt's observability objects, rendered offline: the Grafana dashboard ConfigMap
(equal to the generator's output), scrape annotations, the worker's metrics port and
the PodMonitor beside the ServiceMonitor."""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import helm_python
import yaml

from tests.charts import rendering
from tests.charts.rendering import Rendered

Render = Callable[[str], Rendered]

DASHBOARD = rendering.CHART_DIR / "dashboards" / "plnt.json"
GENERATOR = rendering.CHART_DIR / "dashboards" / "generate.py"
RULES = rendering.CHART_DIR / "rules" / "slo.rules.yaml"
WORKER = "plnt-worker"
API = "plnt-apiserver"


def test_the_committed_dashboard_is_the_generators_output() -> None:
    generated = runpy.run_path(str(GENERATOR))["render"]()
    assert DASHBOARD.read_text() == generated


def test_the_dashboard_ships_as_a_configmap_for_grafanas_sidecar(rendered: Render) -> None:
    (configmap,) = [
        c for c in rendered("default").all("ConfigMap") if "plnt.json" in c.get("data", {})
    ]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["plnt.json"]) == json.loads(DASHBOARD.read_text())


def test_pods_carry_scrape_annotations_and_the_worker_serves_metrics(rendered: Render) -> None:
    r = rendered("default")
    worker = r.one("Deployment", WORKER)
    annotations = worker["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9090"
    container = rendering.container(worker, "worker")
    assert "--metrics-port=9090" in container["args"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in container["ports"]
    api = r.one("Deployment", API)["spec"]["template"]["metadata"]["annotations"]
    assert (api["prometheus.io/scrape"], api["prometheus.io/scheme"]) == ("true", "https")


def test_the_podmonitor_selects_the_worker_pods_by_their_metrics_port(rendered: Render) -> None:
    r = rendered("cert-manager")
    (monitor,) = r.all("PodMonitor")
    worker = r.one("Deployment", WORKER)
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    ports = rendering.container(worker, "worker")["ports"]
    assert endpoint["port"] in {p["name"] for p in ports} and endpoint["path"] == "/metrics"
    assert rendered("default").all("PodMonitor") == []


def test_the_slo_rules_pass_promtools_own_rule_tests() -> None:
    tests = Path(__file__).with_name("promtool") / "slo_rules_test.yaml"
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool not found: apt-get install prometheus (.ci/run does)"
    result = subprocess.run(
        [promtool, "test", "rules", tests.name],
        cwd=tests.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_slo_rules_ship_as_a_prometheusrule_equal_to_the_tested_file(
    chart: helm_python.Chart,
) -> None:
    values = {"prometheusRules": {"enabled": True, "labels": {"release": "prometheus"}}}
    (rule,) = rendering.render(chart, values).all("PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert set(alerts) == {"PlntSLOFastBurn", "PlntSLOSlowBurn"}
    assert (
        "> 14.4" in alerts["PlntSLOFastBurn"]["expr"] and "> 6" in alerts["PlntSLOSlowBurn"]["expr"]
    )
    assert rendering.render(chart, None).all("PrometheusRule") == []  # off by default
