"""charts/plnt rendered offline: lint, strict Kubernetes schemas, the APIService and its
certificates, the API server and worker Deployments, and the values schema.

Kinds the Kubernetes schemas do not have (cert-manager's Issuer and Certificate, the
Prometheus Operator's ServiceMonitor) are checked against the fields their CRDs
require, by hand, in `test_crd_objects_carry_the_fields_their_crds_require`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import typer.main
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from plnt.cli import main as cli_main
from plnt.sagas.targets import routes
from tests.charts import rendering
from tests.charts.rendering import NAMESPACE, Rendered

Render = Callable[[str], Rendered]

SETS = list(rendering.VALUES_SETS)
NOT_IN_KUBERNETES_SCHEMAS = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
}
# Every flag of `plnt serve` the chart may pass.
SERVE_FLAGS = {
    "trusted-signer",
    "signer-identity",
    "require-signatures",
    "bind-address",
    "secure-port",
    "tls-cert-file",
    "tls-private-key-file",
    "etcd-servers",
    "etcd-cafile",
    "etcd-certfile",
    "etcd-keyfile",
    "etcd-prefix",
    "temporal-address",
    "temporal-namespace",
    "temporal-tls-ca-file",
    "temporal-tls-cert-file",
    "temporal-tls-key-file",
    "temporal-api-key-file",
    "authentication-token-webhook-cache-ttl",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
    "max-requests-inflight",
    "max-mutating-requests-inflight",
    "idle-connection-timeout",
    "invoke-timeout",
    "catalog-refresh",
    "catalog-sources",
    "no-sagas",
}
API = "plnt-apiserver"
SERVICE_DNS = f"{API}.{NAMESPACE}.svc"


def serve_flags(r: Rendered) -> dict[str, str | None]:
    args = rendering.container(r.one("Deployment", API), "apiserver")["args"]
    assert args[0] == "serve"
    return rendering.flags(args[1:])


# -- lint, render, schemas ------------------------------------------------------------


@pytest.mark.parametrize("name", SETS)
def test_chart_lints_without_errors_or_warnings(name: str) -> None:
    report = helm_python.lint(
        rendering.CHART_DIR,
        rendering.VALUES_SETS[name],
        strict=True,
        namespace=NAMESPACE,
        kube_version=f"v{rendering.KUBERNETES_VERSION}",
    )
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("default", {"Deployment": 2, "StatefulSet": 1, "Secret": 3, "APIService": 1}),
        ("ha", {"Deployment": 2, "StatefulSet": 1, "PodDisruptionBudget": 2}),
        ("external-etcd", {"Deployment": 2, "Secret": 1, "StatefulSet": 0}),
        ("cert-manager", {"Certificate": 2, "Issuer": 2, "ServiceMonitor": 1, "Secret": 2}),
        ("temporal-dev", {"Deployment": 3, "NetworkPolicy": 4}),
        ("temporal-cloud", {"Deployment": 2, "NetworkPolicy": 0}),
    ],
)
def test_each_values_set_renders_its_kinds(rendered: Render, name: str, kinds: dict) -> None:
    counts = rendered(name).kinds()
    assert {kind: counts.get(kind, 0) for kind in kinds} == kinds


@pytest.mark.parametrize("name", SETS)
def test_every_object_validates_strictly_against_the_kubernetes_schemas(
    rendered: Render, name: str
) -> None:
    assert rendering.validate_strictly(rendered(name).objects) <= NOT_IN_KUBERNETES_SCHEMAS


def test_strict_validation_refuses_a_field_kubernetes_does_not_know(rendered: Render) -> None:
    deployment = rendered("default").one("Deployment", API)
    bad = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, rendering.KUBERNETES_VERSION, strict=True)


def test_crd_objects_carry_the_fields_their_crds_require(rendered: Render) -> None:
    r = rendered("cert-manager")
    for issuer in r.all("Issuer"):
        assert set(issuer["spec"]) & {"selfSigned", "ca"}, issuer["metadata"]["name"]
    for cert in r.all("Certificate"):
        spec = cert["spec"]
        assert spec["secretName"] and spec["issuerRef"]["name"]
        issuer = r.one("Issuer", spec["issuerRef"]["name"])
        assert spec["issuerRef"]["kind"] == "Issuer" and issuer["metadata"]["namespace"]
    ca_issuer = next(i for i in r.all("Issuer") if "ca" in i["spec"])
    ca_cert = next(c for c in r.all("Certificate") if c["spec"].get("isCA"))
    assert ca_issuer["spec"]["ca"]["secretName"] == ca_cert["spec"]["secretName"]

    (monitor,) = r.all("ServiceMonitor")
    service = r.one("Service", API)
    labels = service["metadata"]["labels"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["tlsConfig"]["serverName"] == SERVICE_DNS
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == f"{API}-tls"


# -- the APIService and its certificates ----------------------------------------------


def test_apiservice_names_the_service_on_its_port(rendered: Render) -> None:
    r = rendered("default")
    spec = r.one("APIService", "v1.plnt.work")["spec"]
    assert (spec["group"], spec["version"]) == ("plnt.work", "v1")
    assert spec["service"] == {"name": API, "namespace": NAMESPACE, "port": 443}
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (1000, 15)
    assert "insecureSkipTLSVerify" not in spec
    service = r.one("Service", API)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443 and port["name"] == "https"
    pod = r.one("Deployment", API)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod.items()
    ports = rendering.container(r.one("Deployment", API), "apiserver")["ports"]
    assert {(p["name"], p["containerPort"]) for p in ports} == {("https", 6443)}


def test_ca_bundle_is_a_ca_that_verifies_the_serving_certificate(rendered: Render) -> None:
    r = rendered("default")
    ca_pem = rendering.base64.b64decode(r.one("APIService", "v1.plnt.work")["spec"]["caBundle"])
    ca = rendering.certificate(ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    secret = r.one("Secret", f"{API}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert rendering.secret_bytes(secret, "ca.crt") == ca_pem
    serving = rendering.certificate(rendering.secret_bytes(secret, "tls.crt"))
    serving.verify_directly_issued_by(ca)
    assert SERVICE_DNS in rendering.dns_names(serving)
    usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usages
    now = datetime.datetime.now(datetime.UTC)
    assert serving.not_valid_before_utc <= now < serving.not_valid_after_utc

    key = serialization.load_pem_private_key(rendering.secret_bytes(secret, "tls.key"), None)
    assert key.public_key().public_numbers() == serving.public_key().public_numbers()


def test_a_fresh_render_generates_a_new_ca(chart: helm_python.Chart, rendered: Render) -> None:
    again = rendering.render(chart, None).one("APIService", "v1.plnt.work")["spec"]["caBundle"]
    assert again != rendered("default").one("APIService", "v1.plnt.work")["spec"]["caBundle"]


def test_with_cert_manager_the_ca_is_injected_from_the_serving_certificate(
    rendered: Render,
) -> None:
    r = rendered("cert-manager")
    apiservice = r.one("APIService", "v1.plnt.work")
    assert "caBundle" not in apiservice["spec"]
    ref = apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    namespace, name = ref.split("/")
    cert = r.one("Certificate", name)
    assert cert["metadata"]["namespace"] == namespace == NAMESPACE
    assert SERVICE_DNS in cert["spec"]["dnsNames"]
    assert "server auth" in cert["spec"]["usages"]
    assert not [s for s in r.all("Secret") if s["metadata"]["name"] == f"{API}-tls"]
    _, volume = rendering.mount_of(r.one("Deployment", API), "apiserver", "/etc/plnt/serving/x")
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]


# -- the API server Deployment --------------------------------------------------------


def test_serve_flags_are_exactly_the_commands_flags(rendered: Render) -> None:
    passed: set[str] = set()
    for name in SETS:
        passed |= set(serve_flags(rendered(name)))
    assert passed == SERVE_FLAGS


@pytest.mark.parametrize("name", SETS)
def test_the_real_commands_accept_the_charts_arguments(rendered: Render, name: str) -> None:
    commands = typer.main.get_command(cli_main.app).commands  # type: ignore[attr-defined]
    r = rendered(name)
    for deployment, container_name in [(API, "apiserver"), ("plnt-worker", "worker")]:
        args = rendering.container(r.one("Deployment", deployment), container_name)["args"]
        command = commands[args[0]]
        params = command.make_context(args[0], list(args[1:])).params
        assert params["temporal_address"] == rendering.flags(args[1:])["temporal-address"]
    serve = {opt: p for p in commands["serve"].params for opt in p.opts}
    for flag in serve_flags(r):
        expected = "PLNT_" + flag.removeprefix("no-").upper().replace("-", "_")
        option = serve.get(f"--{flag}") or next(
            p for p in commands["serve"].params if f"--{flag}" in p.secondary_opts
        )
        assert option.envvar == expected


def test_serve_flags_point_at_mounted_files_and_the_services(rendered: Render) -> None:
    r = rendered("default")
    deployment = r.one("Deployment", API)
    f = serve_flags(r)
    assert f["bind-address"] == "0.0.0.0" and f["secure-port"] == "6443"
    assert f["etcd-prefix"] == "/registry"
    assert f["temporal-address"] == "temporal-frontend.temporal.svc:7233"
    assert f["temporal-namespace"] == "default"
    assert f["authentication-token-webhook-cache-ttl"] == "10s"
    assert f["authorization-webhook-cache-authorized-ttl"] == "10s"
    assert f["authorization-webhook-cache-unauthorized-ttl"] == "10s"
    assert "no-sagas" not in f
    for flag, secret in [
        ("tls-cert-file", f"{API}-tls"),
        ("tls-private-key-file", f"{API}-tls"),
        ("etcd-cafile", "plnt-etcd-client-tls"),
        ("etcd-certfile", "plnt-etcd-client-tls"),
        ("etcd-keyfile", "plnt-etcd-client-tls"),
    ]:
        path = f[flag]
        assert path is not None
        mount, volume = rendering.mount_of(deployment, "apiserver", path)
        assert mount["readOnly"] is True
        assert volume["secret"]["secretName"] == secret
        key = path.removeprefix(mount["mountPath"] + "/")
        assert key in r.one("Secret", secret)["data"]
    assert f["etcd-servers"] == "https://plnt-etcd-0.plnt-etcd-headless.plnt-system.svc:2379"


def test_temporal_tls_and_api_key_files_come_from_their_secrets_for_server_and_worker(
    rendered: Render,
) -> None:
    r = rendered("temporal-cloud")
    f = serve_flags(r)
    assert "no-sagas" in f and f["no-sagas"] is None
    worker = r.one("Deployment", "plnt-worker")
    worker_flags = rendering.flags(rendering.container(worker, "worker")["args"][1:])
    expected = {
        "temporal-tls-ca-file": ("temporal-mtls", "ca.crt"),
        "temporal-tls-cert-file": ("temporal-mtls", "tls.crt"),
        "temporal-tls-key-file": ("temporal-mtls", "tls.key"),
        "temporal-api-key-file": ("temporal-api-key", "key"),
    }
    for deployment, container, flags in (
        (r.one("Deployment", API), "apiserver", f),
        (worker, "worker", worker_flags),
    ):
        assert flags["temporal-address"] == "plnt.a1b2c.tmprl.cloud:7233"
        for flag, (secret, key) in expected.items():
            path = flags[flag]
            assert path is not None
            mount, volume = rendering.mount_of(deployment, container, path)
            assert volume["secret"]["secretName"] == secret
            assert path == f"{mount['mountPath']}/{key}"


@pytest.mark.parametrize(("name", "replicas"), [("default", 2), ("ha", 3)])
def test_api_server_runs_replicas_spread_over_nodes_under_a_pdb(
    rendered: Render, name: str, replicas: int
) -> None:
    r = rendered(name)
    deployment = r.one("Deployment", API)
    assert deployment["spec"]["replicas"] == replicas
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    if name == "ha":
        (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    else:
        term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    pdb = r.one("PodDisruptionBudget", API)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_probes_ask_livez_and_readyz_over_https_on_the_secure_port(rendered: Render) -> None:
    c = rendering.container(rendered("default").one("Deployment", API), "apiserver")
    probes = {k: c[k]["httpGet"] for k in ("livenessProbe", "readinessProbe", "startupProbe")}
    assert probes["livenessProbe"]["path"] == "/livez"
    assert probes["readinessProbe"]["path"] == "/readyz"
    for probe in probes.values():
        assert probe["scheme"] == "HTTPS" and probe["port"] == "https"
    assert c["resources"]["requests"] and c["resources"]["limits"]


@pytest.mark.parametrize("name", ["default", "ha", "temporal-dev"])
def test_every_pod_runs_restricted(rendered: Render, name: str) -> None:
    r = rendered(name)
    workloads = r.all("Deployment") + r.all("StatefulSet")
    assert workloads
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"]:
            sc = c["securityContext"]
            where = f"{workload['metadata']['name']}/{c['name']}"
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"] == {"drop": ["ALL"]}, where
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert c["resources"]["requests"], where


def test_image_defaults_to_the_charts_app_version(
    chart: helm_python.Chart, rendered: Render
) -> None:
    app_version = chart.metadata["appVersion"]
    for name in ("apiserver", "worker"):
        c = rendering.container(rendered("default").one("Deployment", f"plnt-{name}"), name)
        assert c["image"] == f"ghcr.io/plnt-work/plnt:{app_version}"


# -- the worker -----------------------------------------------------------------------


def test_worker_runs_plnt_worker_in_cluster_with_an_emptydir_state_dir(rendered: Render) -> None:
    worker = rendered("default").one("Deployment", "plnt-worker")
    args = rendering.container(worker, "worker")["args"]
    assert args[0] == "worker"
    f = rendering.flags(args[1:])
    assert f == {
        "temporal-address": "temporal-frontend.temporal.svc:7233",
        "temporal-namespace": "default",
        "state-dir": "/var/lib/plnt",
        "metrics-port": "9090",
        "runner-chart": "oci://ghcr.io/plnt-work/charts/workflow-runner:0.1.0",
        "runner-values": "/etc/plnt/runner/values.yaml",
    }
    mount, volume = rendering.mount_of(worker, "worker", "/var/lib/plnt/runs")
    assert mount["mountPath"] == "/var/lib/plnt" and "emptyDir" in volume
    assert worker["spec"]["template"]["spec"]["serviceAccountName"] == "plnt-worker"


def test_the_kubernetes_target_gets_its_chart_shared_values_and_the_rights_helm_needs(
    chart: helm_python.Chart,
) -> None:
    shared = {"image": {"repository": "registry.example/plnt", "tag": "1.2.3"}}
    values = {
        "temporal": {"address": "t:7233"},
        "worker": {"kubernetesTarget": {"runnerValues": shared}},
    }
    r = rendering.render(chart, values)
    worker = r.one("Deployment", "plnt-worker")
    path = rendering.flags(rendering.container(worker, "worker")["args"][1:])["runner-values"]
    mount, volume = rendering.mount_of(worker, "worker", path)
    config = r.one("ConfigMap", volume["configMap"]["name"])
    assert yaml.safe_load(config["data"][path.removeprefix(mount["mountPath"] + "/")]) == shared
    rules = r.one("ClusterRole", "plnt-worker")["rules"]
    granted = {(g, res, v) for rule in rules for g in rule["apiGroups"]
               for res in rule["resources"] for v in rule["verbs"]}  # fmt: skip
    for needed in (
        ("apps", "deployments", "create"),
        ("apps", "deployments/scale", "patch"),
        ("", "secrets", "delete"),  # Helm's release records
        ("discovery.k8s.io", "endpointslices", "list"),
        ("", "pods", "list"),
        ("", "nodes", "list"),  # room per pool before a canary is installed
    ):
        assert needed in granted, needed
    off = rendering.render(chart, {**values, "worker": {"kubernetesTarget": {"enabled": False}}})
    worker_off = off.one("Deployment", "plnt-worker")
    assert "runner-chart" not in rendering.flags(
        rendering.container(worker_off, "worker")["args"][1:]
    )
    assert not any(
        (g, res, v) == ("apps", "deployments", "create")
        for rule in off.one("ClusterRole", "plnt-worker")["rules"]
        for g in rule["apiGroups"] for res in rule["resources"] for v in rule["verbs"]
    )  # fmt: skip


def test_httproutes_are_off_by_default_and_on_pass_their_defaults_and_grant_their_rbac(
    chart: helm_python.Chart,
) -> None:
    def routes_granted(r: Rendered) -> set[str]:
        rules = r.one("ClusterRole", "plnt-worker")["rules"]
        return {v for rule in rules if "httproutes" in rule["resources"] for v in rule["verbs"]}

    def worker_args(r: Rendered) -> list[str]:
        return list(rendering.container(r.one("Deployment", "plnt-worker"), "worker")["args"])

    base = {"temporal": {"address": "t:7233"}}
    off = rendering.render(chart, base)
    assert "routes" not in rendering.flags(worker_args(off)[1:])
    assert routes_granted(off) == set()

    gateway = {"name": "public", "namespace": "gateways", "sectionName": "https"}
    on_values = {"enabled": True, "gateway": gateway, "hostnames": ["models.example.com"]}
    on = rendering.render(chart, {**base, "worker": {"kubernetesTarget": {"routes": on_values}}})
    args = worker_args(on)
    commands = typer.main.get_command(cli_main.app).commands  # type: ignore[attr-defined]
    params = commands["worker"].make_context(args[0], args[1:]).params
    parsed = routes.ClusterRoutes.parse(params["routes"])
    assert parsed.gateway is not None and parsed.gateway.section_name == "https"
    assert (parsed.hostnames, parsed.path, parsed.every_run) == (["models.example.com"], "/", False)
    assert {"create", "patch", "delete", "get"} <= routes_granted(on)

    bare = rendering.render(
        chart, {**base, "worker": {"kubernetesTarget": {"routes": {"enabled": True}}}}
    )
    assert (
        routes.ClusterRoutes.parse(rendering.flags(worker_args(bare)[1:])["routes"]).gateway is None
    )


# -- Temporal dev server --------------------------------------------------------------


def test_temporal_dev_server_runs_start_dev_and_is_marked_not_for_production(
    rendered: Render,
) -> None:
    r = rendered("temporal-dev")
    dev = r.one("Deployment", "plnt-temporal")
    c = rendering.container(dev, "temporal")
    assert c["image"].startswith("temporalio/temporal:")
    command = c["command"] + c["args"]
    assert command[:6] == ["temporal", "server", "start-dev", "--ip", "0.0.0.0", "--headless"]
    assert command[6:] == ["--namespace", "plnt"]
    assert dev["spec"]["replicas"] == 1
    service = r.one("Service", "plnt-temporal")
    assert service["spec"]["ports"][0]["port"] == 7233
    address = "plnt-temporal.plnt-system.svc:7233"
    assert serve_flags(r)["temporal-address"] == address
    worker_args = rendering.container(r.one("Deployment", "plnt-worker"), "worker")["args"]
    assert f"--temporal-address={address}" in worker_args
    assert "NOT FOR PRODUCTION" in r.notes
    assert "NOT FOR PRODUCTION" in (rendering.CHART_DIR / "values.yaml").read_text()
    assert "NOT FOR PRODUCTION" not in rendered("default").notes


# -- values schema --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"apiserver": {"replicas": "two"}}, "/apiserver/replicas"),
        ({"etcd": {"mode": "nonsense"}}, "/etcd/mode"),
        ({"replicas": 2}, "'replicas' not allowed"),
        ({"etcd": {"replicas": 2}}, "/etcd/replicas"),
        ({"etcd": {"mode": "external"}}, "/etcd/external/servers"),
        ({"temporal": {"address": ""}}, "/temporal/address"),
        ({"apiserver": {"authCache": {"tokenTTL": "ten seconds"}}}, "/apiserver/authCache"),
        ({"apiserver": {"maxRequestsInflight": -1}}, "/apiserver/maxRequestsInflight"),
        ({"apiserver": {"idleConnectionTimeout": 0}}, "/apiserver/idleConnectionTimeout"),
        ({"apiserver": {"invokeTimeout": -5}}, "/apiserver/invokeTimeout"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"apiService": {"versionPriority": 0}}, "/apiService/versionPriority"),
    ],
)
def test_bad_values_fail_naming_the_value(
    chart: helm_python.Chart, values: dict[str, Any], named: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError) as failure:
        rendering.render(chart, values)
    assert named in str(failure.value)


def test_workers_follow_the_cpu_limit_unless_set_and_are_left_to_plnt_serve_without_one(
    chart: helm_python.Chart, rendered: Render
) -> None:
    def workers_env(r: Rendered) -> list[dict[str, Any]]:
        env = rendering.container(r.one("Deployment", API), "apiserver")["env"]
        return [item for item in env if item["name"] == "PLNT_WORKERS"]

    assert workers_env(rendered("default")) == []  # no CPU limit: plnt serve counts its CPUs
    limited = {"apiserver": {"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}}
    [from_limit] = workers_env(rendering.render(chart, limited))
    assert from_limit["valueFrom"]["resourceFieldRef"] == {
        "containerName": "apiserver",
        "resource": "limits.cpu",
        "divisor": "1",
    }
    overridden = {"apiserver": {**limited["apiserver"], "workers": 3}}
    [fixed] = workers_env(rendering.render(chart, overridden))
    assert fixed == {"name": "PLNT_WORKERS", "value": "3"}
    with pytest.raises(helm_python.HelmValuesError, match="workers"):
        rendering.render(chart, {"apiserver": {"workers": 0}})
