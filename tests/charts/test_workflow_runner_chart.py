"""charts/workflow-runner rendered offline: lint, strict Kubernetes schemas, the runner's
Deployment and its arguments, the pinned spec ConfigMap, GPU classes, exposure and
scaling, and the values model that the chart's schema and defaults are generated from.

The Prometheus Operator's ServiceMonitor is not in the Kubernetes schemas; it is checked
by hand against the fields its CRD requires, in
`test_service_monitor_selects_the_service_and_scrapes_its_metrics_port`.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import helm_python
import jsonschema
import pydantic
import pytest
import typer.main
import yaml

from plnt.api.workflowruns import StepCacheSpec
from plnt.cli import main as cli_main
from plnt.runner import __main__ as runner_main
from plnt.runner import serving as runner_serving
from plnt.runner import settings as runner_settings
from plnt.sagas.targets import local_processes, runners
from plnt.sagas.values import RunRef
from tests.charts import rendering
from tests.charts.rendering import Rendered

CHART_DIR = rendering.REPO / "charts" / "workflow-runner"
NAMESPACE = "plnt-runs"
SPEC = (rendering.REPO / "examples" / "chat.workflow.yaml").read_bytes()
DIGEST = "sha256:" + hashlib.sha256(SPEC).hexdigest()
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NOT_IN_KUBERNETES_SCHEMAS = {("monitoring.coreos.com/v1", "ServiceMonitor")}

A100 = {
    "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"memory": "8Gi"}},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
                ]
            }
        }
    },
}
L4 = {"resources": {"limits": {"nvidia.com/gpu": 1}}, "nodeSelector": {"pool": "l4"}}
CLUSTER_SETTINGS: dict[str, Any] = {
    "gpuClasses": {"a100": A100, "l4": L4},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "plnt.work/runners", "operator": "Exists"}],
}


def revision(number: int = 1, **fields: Any) -> runners.Revision:
    defaults: dict[str, Any] = {
        "run": RunRef("team-a", "chat", "7f0c0e4e-1b6a-4c3e-9a59-0d3c5b7e8a10"),
        "revision": number,
        "digest": DIGEST,
        "spec": SPEC,
        "ref": "oci://registry.example/workflows/chat:1.0.0",
    }
    return runners.Revision(**{**defaults, **fields})


VLLM = runners.BackendConfig(
    name="vllm",
    type="vllm",
    endpoint="http://vllm.models.svc:8000/v1",
    model="llama-3-8b",
    credentials=runners.SecretKeyRef("vllm-key", "token"),
)
REVISIONS: dict[str, tuple[runners.Revision, dict[str, Any] | None]] = {
    "echo": (revision(1, backend=runners.BackendConfig(type="echo", latency_ms=2.5)), None),
    "gpu": (revision(2, backend=VLLM, gpu_class="a100", replicas=2), CLUSTER_SETTINGS),
    "exposed": (
        revision(
            3,
            replicas=2,
            cache=runners.CacheConfig.of(StepCacheSpec(enabled=False)),
            image=runners.Image(repository="registry.example/plnt", tag="0.2.0"),
        ),
        {
            "ingress": {
                "enabled": True,
                "className": "nginx",
                "host": "chat-r3.runs.example.com",
                "tlsSecretName": "runs-example-tls",
            },
            "autoscaling": {"enabled": True, "maxReplicas": 8, "metric": "inFlight"},
            "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
        },
    ),
    "guarded": (
        revision(
            5,
            backend=runners.BackendConfig(
                name="llama",
                type="openai",
                endpoint="http://llama.models.svc:8080/v1",
                model="qwen",
                max_concurrency=2,
                fallback=runners.BackendConfig(
                    name="small",
                    type="openai",
                    endpoint="http://small.models.svc:8080/v1",
                    model="tiny",
                    max_concurrency=8,
                    credentials=runners.SecretKeyRef("small-key", "token"),
                ),
            ),
        ),
        None,
    ),
    "cpu-hpa": (
        revision(4, replicas=3),
        {"autoscaling": {"enabled": True, "maxReplicas": 6, "metric": "cpu"}},
    ),
}
# The chart's own defaults with only the required values: what `helm install` by hand needs.
DEFAULTS: dict[str, Any] = {
    "run": {"namespace": "team-a", "name": "chat", "uid": "u1"},
    "revision": 1,
    "workflow": {"ref": "chat.workflow.yaml", "digest": DIGEST, "spec": SPEC.decode()},
}
SETS = ["default", *REVISIONS]


def values_of(name: str) -> dict[str, Any]:
    if name == "default":
        return DEFAULTS
    rev, settings = REVISIONS[name]
    return rev.to_values(settings)


def release_of(name: str) -> str:
    return "chat-r1" if name == "default" else REVISIONS[name][0].release_name()


@pytest.fixture(scope="module")
def chart() -> Iterator[helm_python.Chart]:
    with helm_python.Chart.load(CHART_DIR) as loaded:
        yield loaded


def render(chart: helm_python.Chart, values: dict[str, Any], release: str = "chat-r1") -> Rendered:
    return rendering.parse(chart.render(values, name=release, namespace=NAMESPACE, is_install=True))


Render = Callable[[str], Rendered]


@pytest.fixture(scope="module")
def rendered(chart: helm_python.Chart) -> Render:
    cache: dict[str, Rendered] = {}

    def get(name: str) -> Rendered:
        if name not in cache:
            cache[name] = render(chart, values_of(name), release_of(name))
        return cache[name]

    return get


def deployment(r: Rendered) -> dict[str, Any]:
    (found,) = r.all("Deployment")
    return found


def runner_container(r: Rendered) -> dict[str, Any]:
    return rendering.container(deployment(r), "runner")


def runner_flags(r: Rendered) -> dict[str, str | None]:
    args = runner_container(r)["args"]
    assert args[0] == "runner"
    return rendering.flags(args[1:])


# -- lint, render, schemas ------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_chart_lints_without_errors_or_warnings(name: str) -> None:
    report = helm_python.lint(
        CHART_DIR,
        values_of(name),
        strict=True,
        namespace=NAMESPACE,
        kube_version=f"v{rendering.KUBERNETES_VERSION}",
    )
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        (
            "default",
            {"ConfigMap": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1},
        ),
        ("echo", {"ConfigMap": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1}),
        ("gpu", {"ConfigMap": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1}),
        (
            "exposed",
            {
                "ConfigMap": 1,
                "Deployment": 1,
                "Service": 1,
                "PodDisruptionBudget": 1,
                "Ingress": 1,
                "HorizontalPodAutoscaler": 1,
                "ServiceMonitor": 1,
            },
        ),
        (
            "cpu-hpa",
            {
                "ConfigMap": 1,
                "Deployment": 1,
                "Service": 1,
                "PodDisruptionBudget": 1,
                "HorizontalPodAutoscaler": 1,
            },
        ),
    ],
)
def test_each_values_set_renders_exactly_its_kinds(
    rendered: Render, name: str, kinds: dict[str, int]
) -> None:
    assert rendered(name).kinds() == kinds


@pytest.mark.parametrize("name", SETS)
def test_every_object_validates_strictly_against_the_kubernetes_schemas(
    rendered: Render, name: str
) -> None:
    assert rendering.validate_strictly(rendered(name).objects) <= NOT_IN_KUBERNETES_SCHEMAS


@pytest.mark.parametrize("name", SETS)
def test_every_object_carries_the_run_and_revision_labels(rendered: Render, name: str) -> None:
    values = values_of(name)
    for obj in rendered(name).objects:
        labels = obj["metadata"]["labels"]
        assert labels["plnt.work/run"] == values["run"]["name"]
        assert labels["plnt.work/run-uid"] == values["run"]["uid"]
        assert labels["plnt.work/revision"] == str(values["revision"])
        assert labels["app.kubernetes.io/instance"] == release_of(name)
        assert labels["app.kubernetes.io/name"] == "workflow-runner"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert obj["metadata"]["namespace"] == NAMESPACE


def test_a_run_name_longer_than_a_label_value_becomes_a_hashed_label(
    chart: helm_python.Chart,
) -> None:
    names = ["a" * 60 + "." + "b" * 100, "a" * 60 + "." + "c" * 100]
    labels = set()
    for name in names:
        rev = revision(1, run=RunRef("team-a", name, "u1"))
        r = render(chart, rev.to_values(), rev.release_name())
        label = deployment(r)["metadata"]["labels"]["plnt.work/run"]
        assert len(label) <= 63 and LABEL_VALUE.match(label), label
        assert deployment(r)["metadata"]["annotations"]["plnt.work/run-name"] == name
        labels.add(label)
    assert len(labels) == 2


# -- the runner Deployment ------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_runner_arguments_are_accepted_by_the_real_plnt_runner_parser(
    rendered: Render, name: str
) -> None:
    args = runner_container(rendered(name))["args"]
    command = typer.main.get_command(cli_main.app).commands["runner"]  # type: ignore[attr-defined]
    context = command.make_context("runner", list(args[1:]))
    assert context.params["host"] == "0.0.0.0"
    # `python -m plnt.runner` takes the same options.
    parsed = runner_main.parse_args(list(args[1:]))
    assert parsed.spec == Path(context.params["spec"])
    assert parsed.port == context.params["port"]


def test_runner_serves_the_mounted_spec_on_the_container_port_behind_the_service(
    rendered: Render,
) -> None:
    r = rendered("default")
    flags = runner_flags(r)
    spec_path = flags["spec"]
    assert spec_path is not None
    mount, volume = rendering.mount_of(deployment(r), "runner", spec_path)
    assert mount["readOnly"] is True
    config_map = r.one("ConfigMap", volume["configMap"]["name"])
    relative = spec_path.removeprefix(mount["mountPath"].rstrip("/") + "/")
    (item,) = [i for i in volume["configMap"]["items"] if i["path"] == relative]
    assert item["key"] in config_map["data"]

    (port,) = runner_container(r)["ports"]
    assert (port["name"], port["containerPort"], flags["port"]) == ("http", 8080, "8080")
    service = r.one("Service", "chat-r1")
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == "http" and service_port["port"] == 80
    pod_labels = deployment(r)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment(r)["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    pdb = r.one("PodDisruptionBudget", "chat-r1")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def test_probes_ask_the_runners_health_endpoints_on_its_port(rendered: Render) -> None:
    c = runner_container(rendered("default"))
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}


@pytest.mark.parametrize("name", SETS)
def test_config_map_holds_exactly_the_pinned_spec_bytes(rendered: Render, name: str) -> None:
    r = rendered(name)
    (config_map,) = r.all("ConfigMap")
    assert config_map["immutable"] is True
    data = config_map["data"]["spec.yaml"]
    assert set(config_map["data"]) <= {"spec.yaml", "backend.json"}
    assert data.encode() == SPEC
    digest = values_of(name)["workflow"]["digest"]
    assert "sha256:" + hashlib.sha256(data.encode()).hexdigest() == digest
    annotations = deployment(r)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["plnt.work/workflow-digest"] == digest


def test_a_spec_with_quotes_templates_and_unicode_keeps_its_bytes(
    chart: helm_python.Chart,
) -> None:
    spec = SPEC + b'# "quoted" \\ {{ not a template }} <&> \xc3\xa9\xe2\x9c\x93 \t tab\n'
    rev = revision(1, spec=spec, digest="sha256:" + hashlib.sha256(spec).hexdigest())
    (config_map,) = render(chart, rev.to_values(), rev.release_name()).all("ConfigMap")
    (data,) = config_map["data"].values()
    assert data.encode() == spec


def test_pods_run_as_non_root_with_a_read_only_root_and_runtime_default_seccomp(
    rendered: Render,
) -> None:
    pod = deployment(rendered("default"))["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    context = runner_container(rendered("default"))["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pods_carry_prometheus_scrape_annotations_for_the_metrics_endpoint(
    rendered: Render,
) -> None:
    annotations = deployment(rendered("default"))["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "8080"
    assert annotations["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize("name", list(REVISIONS))
def test_cache_flags_are_the_ones_the_local_target_passes_for_the_same_revision(
    rendered: Render, name: str
) -> None:
    rev = REVISIONS[name][0]
    local = local_processes.cache_arguments(rev.cache)
    local_flags = dict(zip(local[::2], local[1::2], strict=True))
    flags = runner_flags(rendered(name))
    assert int(flags["cache-max-entries"] or "") == int(local_flags["--cache-max-entries"])
    assert float(flags["cache-ttl-seconds"] or "") == float(local_flags["--cache-ttl-seconds"])
    if name == "exposed":
        assert flags["cache-max-entries"] == "0"


def test_the_backends_limit_and_fallback_reach_the_real_runners_settings(
    rendered: Render, tmp_path: Path
) -> None:
    r = rendered("guarded")
    flags = runner_flags(r)
    config_path = flags["backend-config"]
    assert config_path is not None
    mount, volume = rendering.mount_of(deployment(r), "runner", config_path)
    config_map = r.one("ConfigMap", volume["configMap"]["name"])
    relative = config_path.removeprefix(mount["mountPath"].rstrip("/") + "/")
    (item,) = [i for i in volume["configMap"]["items"] if i["path"] == relative]
    written = tmp_path / "backend.json"
    written.write_text(config_map["data"][item["key"]])
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(SPEC)
    parsed = runner_main.parse_args(list(runner_container(r)["args"][1:]))
    assert parsed.backend_config == Path(config_path)
    settings = runner_serving.settings_from_options(
        spec,
        backend_config=written,
        backend_type=parsed.backend_type,
        endpoint=parsed.endpoint,
        model=parsed.model,
        api_key_env=parsed.api_key_env,
        latency_ms=parsed.latency_ms,
    )
    backend = settings.backend
    assert (backend.name, backend.max_concurrency) == ("llama", 2)
    assert backend.endpoint == "http://llama.models.svc:8080/v1"
    fallback = backend.fallback
    assert fallback is not None
    assert (fallback.name, fallback.type, fallback.model) == ("small", "openai", "tiny")
    assert (fallback.endpoint, fallback.max_concurrency) == ("http://small.models.svc:8080/v1", 8)
    assert fallback.api_key_env == runners.FALLBACK_API_KEY_ENV
    (env,) = runner_container(r)["env"]
    assert env == {
        "name": runners.FALLBACK_API_KEY_ENV,
        "valueFrom": {"secretKeyRef": {"name": "small-key", "key": "token"}},
    }


def test_a_backend_without_name_limit_or_fallback_gets_no_backend_config_file(
    rendered: Render,
) -> None:
    r = rendered("echo")
    assert "backend-config" not in runner_flags(r)
    (config_map,) = r.all("ConfigMap")
    assert list(config_map["data"]) == ["spec.yaml"]


def test_echo_backend_takes_its_latency_and_no_key(rendered: Render) -> None:
    flags = runner_flags(rendered("echo"))
    assert (flags["backend-type"], flags["latency-ms"]) == ("echo", "2.5")
    assert "api-key-env" not in flags and "endpoint" not in flags
    assert "env" not in runner_container(rendered("echo"))


def test_backend_key_comes_from_the_named_secret_key_and_never_from_values(
    rendered: Render,
) -> None:
    r = rendered("gpu")
    flags = runner_flags(r)
    assert flags["backend-type"] == "vllm"
    assert flags["endpoint"] == "http://vllm.models.svc:8000/v1"
    assert flags["model"] == "llama-3-8b"
    (env,) = runner_container(r)["env"]
    assert flags["api-key-env"] == env["name"] == runners.API_KEY_ENV
    assert env["valueFrom"] == {"secretKeyRef": {"name": "vllm-key", "key": "token"}}
    assert values_of("gpu")["backend"]["credentials"] == {"secretName": "vllm-key", "key": "token"}
    assert not r.all("Secret")


# -- GPU classes ----------------------------------------------------------------------


def test_a_gpu_class_adds_its_resources_node_selector_tolerations_and_affinity(
    rendered: Render,
) -> None:
    r = rendered("gpu")
    pod = deployment(r)["spec"]["template"]["spec"]
    resources = runner_container(r)["resources"]
    assert resources["limits"] == {"memory": "512Mi", "nvidia.com/gpu": 1}
    assert resources["requests"] == {"cpu": "100m", "memory": "8Gi"}
    assert pod["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    }
    assert pod["tolerations"] == CLUSTER_SETTINGS["tolerations"] + A100["tolerations"]
    assert pod["affinity"] == A100["affinity"]


def test_without_a_gpu_class_no_pod_asks_for_a_gpu(rendered: Render) -> None:
    for name in ("default", "echo", "exposed"):
        resources = runner_container(rendered(name))["resources"]
        assert "nvidia.com/gpu" not in resources.get("limits", {})
        assert "nodeSelector" not in deployment(rendered(name))["spec"]["template"]["spec"]


def test_another_gpu_class_of_the_same_cluster_picks_its_own_pool(
    chart: helm_python.Chart,
) -> None:
    rev = revision(5, gpu_class="l4")
    pod = deployment(render(chart, rev.to_values(CLUSTER_SETTINGS), rev.release_name()))
    spec = pod["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "l4"}
    assert spec["tolerations"] == CLUSTER_SETTINGS["tolerations"]
    assert "affinity" not in spec


# -- exposure, scaling, monitoring ----------------------------------------------------


def test_ingress_routes_its_host_to_the_service_with_tls(rendered: Render) -> None:
    r = rendered("exposed")
    name = release_of("exposed")
    ingress = r.one("Ingress", name)["spec"]
    assert ingress["ingressClassName"] == "nginx"
    assert ingress["tls"] == [
        {"hosts": ["chat-r3.runs.example.com"], "secretName": "runs-example-tls"}
    ]
    (rule,) = ingress["rules"]
    assert rule["host"] == "chat-r3.runs.example.com"
    (path,) = rule["http"]["paths"]
    assert path["backend"]["service"] == {"name": name, "port": {"name": "http"}}
    service_ports = {p["name"] for p in r.one("Service", name)["spec"]["ports"]}
    assert path["backend"]["service"]["port"]["name"] in service_ports


def test_hpa_scales_the_deployment_from_its_replicas_on_in_flight_per_pod(
    rendered: Render,
) -> None:
    r = rendered("exposed")
    name = release_of("exposed")
    hpa = r.one("HorizontalPodAutoscaler", name)
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 8)
    (metric,) = spec["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == "plnt_runner_in_flight"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "4"}
    assert "replicas" not in deployment(r)["spec"]


def test_hpa_on_cpu_targets_utilisation(rendered: Render) -> None:
    spec = rendered("cpu-hpa").one("HorizontalPodAutoscaler", release_of("cpu-hpa"))["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (3, 6)
    (metric,) = spec["metrics"]
    assert metric == {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }


def test_a_revision_scaled_to_zero_has_no_hpa_and_zero_replicas(
    chart: helm_python.Chart,
) -> None:
    rev = revision(6, replicas=0)
    r = render(chart, rev.to_values({"autoscaling": {"enabled": True}}), rev.release_name())
    assert r.all("HorizontalPodAutoscaler") == []
    assert deployment(r)["spec"]["replicas"] == 0


def test_service_monitor_selects_the_service_and_scrapes_its_metrics_port(
    rendered: Render,
) -> None:
    r = rendered("exposed")
    name = release_of("exposed")
    (monitor,) = r.all("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    service = r.one("Service", name)
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["scheme"], endpoint["interval"]) == (
        "/metrics",
        "http",
        "30s",
    )
    assert set(monitor["spec"]) == {"selector", "endpoints"}


# -- the values model and the schema ----------------------------------------------------


def test_values_schema_is_the_one_generated_from_the_model() -> None:
    on_disk = json.loads((CHART_DIR / "values.schema.json").read_text())
    assert on_disk == runners.values_schema(), (
        "regenerate: python -m plnt.sagas.targets.runners"
        " > charts/workflow-runner/values.schema.json"
    )


def test_values_yaml_holds_exactly_the_models_defaults() -> None:
    values_yaml = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    defaults = runners.Values.model_validate(DEFAULTS).model_dump(mode="json", by_alias=True)
    for required in ("run", "revision", "workflow"):
        del defaults[required]
    assert values_yaml == defaults


def test_cache_defaults_are_the_apis() -> None:
    values_yaml = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert values_yaml["cache"] == StepCacheSpec().model_dump(mode="json", by_alias=True)


def test_backend_types_are_the_runners() -> None:
    assert typing.get_args(runners.BackendType) == typing.get_args(runner_settings.BackendType)


@pytest.mark.parametrize("name", list(REVISIONS))
def test_values_of_a_revision_validate_against_the_charts_schema(name: str) -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(values_of(name))


def test_release_names_are_valid_and_distinct_per_run_and_revision() -> None:
    names = set()
    for run_name in ("chat", "9lives", "team.chat", "x" * 60, "x" * 60 + "y", "a" * 253):
        for number in (1, 2, 12345):
            rev = revision(number, run=RunRef("team-a", run_name, "u1"))
            name = rev.release_name()
            helm_python.validate_release_name(name)
            assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name  # a Service name
            assert name.endswith(f"-r{number}")
            names.add(name)
    assert len(names) == 18
    assert revision(3).release_name() == "chat-r3"


def test_to_values_refuses_a_spec_that_is_not_its_digest() -> None:
    with pytest.raises(pydantic.ValidationError) as failure:
        revision(1, spec=SPEC + b"\n").to_values()
    assert "workflow" in str(failure.value) and DIGEST in str(failure.value)


def test_to_values_refuses_an_unknown_gpu_class_naming_it() -> None:
    with pytest.raises(pydantic.ValidationError, match="gpuClass 'h100'"):
        revision(1, gpu_class="h100").to_values(CLUSTER_SETTINGS)


def test_to_values_refuses_a_remote_backend_without_an_endpoint() -> None:
    with pytest.raises(pydantic.ValidationError, match="backend"):
        revision(1, backend=runners.BackendConfig(type="openai")).to_values()


def test_revision_fields_win_over_the_targets_settings() -> None:
    values = revision(1, replicas=3).to_values({"replicas": 9, "port": 9090})
    assert (values["replicas"], values["port"]) == (3, 9090)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"replicas": "two"}, "/replicas"),
        ({"backend": {"type": "llama"}}, "/backend/type"),
        ({"cache": {"maxEntries": -1}}, "/cache/maxEntries"),
        ({"workflow": {**DEFAULTS["workflow"], "digest": "sha256:abc"}}, "/workflow/digest"),
        ({"gpuClasses": {"a100": {"gpus": 1}}}, "/gpuClasses/a100"),
        ({"resources": {"limits": {"memory": "lots"}}}, "/resources/limits/memory"),
        ({"autoscaling": {"metric": "qps"}}, "/autoscaling/metric"),
        ({"ingress": {"tls": True}}, "'tls' not allowed"),
        ({"apiKey": "sk-123"}, "'apiKey' not allowed"),
        ({"backend": {"credentials": {"secretName": "s", "value": "sk"}}}, "'value' not allowed"),
    ],
)
def test_bad_values_fail_the_schema_naming_the_value(
    chart: helm_python.Chart, values: dict[str, Any], named: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError) as failure:
        render(chart, {**DEFAULTS, **values})
    assert named in str(failure.value)


@pytest.mark.parametrize("missing", ["run", "revision", "workflow"])
def test_values_without_a_required_value_fail_naming_it(
    chart: helm_python.Chart, missing: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError) as failure:
        render(chart, {k: v for k, v in DEFAULTS.items() if k != missing})
    assert f"'{missing}'" in str(failure.value)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"gpuClass": "h100", "gpuClasses": {"a100": A100}}, 'gpuClass "h100"'),
        ({"ingress": {"enabled": True}}, "ingress.host"),
        ({"backend": {"type": "openai"}}, "backend.endpoint"),
        ({"replicas": 5, "autoscaling": {"enabled": True, "maxReplicas": 2}}, "maxReplicas"),
    ],
)
def test_inconsistent_values_fail_the_render_naming_the_value(
    chart: helm_python.Chart, values: dict[str, Any], named: str
) -> None:
    with pytest.raises(helm_python.HelmError) as failure:
        render(chart, {**DEFAULTS, **values})
    assert named in str(failure.value)
