"""plnt as an aggregated APIService, with everything real but the cluster itself.

One stack for the package: the kube-apiserver stand-in (tests/support/kube, a test
double: no kube-apiserver runs here) with users and an RBAC-like policy, a real etcd, a
real Temporal dev server, `plnt serve` in a child process pointed at the stand-in with a
service-account-like token, and `plnt worker` in a child process that reaches the plnt
API *through the stand-in's aggregator*, as it would through kube-apiserver in a pod.
The stand-in has `v1.plnt.work` registered, so the real kubectl, pointed at the
stand-in with a token user, reaches plnt exactly as it would in a cluster. Its kubelet
simulator runs the pods of `target: kubernetes` runs as real `plnt runner` processes on
three simulated nodes (two in a cpu pool, one GPU node), and the worker installs them
with `--runner-chart charts/workflow-runner`, as the chart configures it, and keeps the
HTTPRoutes of runs that ask for one (`--routes`).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from plnt.apiserver import pki
from plnt.processes.ports import free_port
from plnt.processes.temporal import TemporalDevServer
from plnt.sagas.targets import local
from tests.support.cluster import SERVICE, Cluster, grant_plnt_identities
from tests.support.etcd import etcd_running
from tests.support.kube import kubelet, standin
from tests.support.kube.policy import Rule
from tests.support.plnt_server import ChildProcess, Kubectl, wait_for
from tests.support.processes import kill_all
from tests.support.stack import WorkerProcess, runner_pids

HELM_STORAGE = "secret"
"""Where the worker's Helm keeps releases: Secrets in the run's namespace, as the CLI does."""
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
RUNNER_VALUES = {
    "gpuClasses": {
        gpu: {
            "resources": {"limits": {"nvidia.com/gpu": count}},
            "nodeSelector": {"plnt.work/pool": "gpu"},
            "tolerations": [GPU_TOLERATION],
        }
        for gpu, count in (("t4", 1), ("a100x2", 2))
    }
}
"""What every runner release shares (`--runner-values`): one class the GPU node can
hold (one GPU) and one it cannot (two)."""
ROUTES = {"gateway": {"name": "public", "namespace": "gateways"}, "path": "/"}
"""The worker's `--routes`: runs that set `spec.route` get an HTTPRoute attached to this
Gateway by default; runs that do not (every other test here) get none."""
NODES = (
    kubelet.node("cpu-1", labels={"plnt.work/pool": "cpu"}),
    kubelet.node("cpu-2", labels={"plnt.work/pool": "cpu"}),
    kubelet.node(
        "gpu-1",
        gpus=1,
        labels={"plnt.work/pool": "gpu"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    ),
)


def _ready(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("cluster")
    serving_ca = pki.CertificateAuthority.create("plnt-serving-ca")
    cert, key = pki.issue_serving_certificate(serving_ca, sans=[SERVICE, "127.0.0.1"])
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)
    temporal = TemporalDevServer(directory / "temporal.db", ui_port=None)
    state = directory / "worker"
    with standin.running(directory / "standin") as kube, etcd_running(directory) as etcd:
        tokens = grant_plnt_identities(kube)
        apiserver_config = kube.write_kubeconfig(
            directory / "apiserver.kubeconfig", token=tokens["apiserver"]
        )
        worker_config = kube.write_kubeconfig(
            directory / "worker.kubeconfig", token=tokens["worker"]
        )
        asyncio.run(temporal.astart())
        port = free_port()
        serve = ChildProcess(
            [
                sys.executable, "-m", "plnt", "serve",
                "--tls-cert-file", str(directory / "tls.crt"),
                "--tls-private-key-file", str(directory / "tls.key"),
                "--etcd-servers", etcd.endpoint,
                "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--temporal-address", temporal.address,
                "--kubeconfig", str(apiserver_config),
            ],
            "plnt is serving at",
            "plnt serve",
        )  # fmt: skip
        chart = str(Path(__file__).resolve().parents[2] / "charts" / "workflow-runner")
        runner_values = directory / "runner-values.yaml"
        runner_values.write_text(yaml.safe_dump(RUNNER_VALUES))
        worker = WorkerProcess(
            temporal.address,
            worker_config,
            state,
            extra_args=(
                "--runner-chart", chart,
                "--runner-values", str(runner_values),
                "--helm-storage-driver", HELM_STORAGE,
                "--routes", json.dumps(ROUTES),
            ),
        )  # fmt: skip
        simulator = kube.start_kubelet(NODES)
        try:
            serve.start()
            built = Cluster(kube, directory, serving_ca, port, serve, worker, simulator)
            ready = lambda: _ready(built.plnt_url, built.plnt_context())  # noqa: E731
            wait_for(ready, timeout=30, message="plnt /readyz")
            kube.register_apiservice(built.plnt_url, serving_ca.cert_pem, server_name=SERVICE)
            worker.start()
            yield built
        finally:
            worker.stop()
            serve.stop()
            local.stop_all(state / "runners")
            kill_all(runner_pids(state))
            temporal.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    """A fresh namespace of the stand-in cluster."""
    name = f"ns-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(name)
    return name


@pytest.fixture
def user(cluster: Cluster, namespace: str, tmp_path: Path) -> Kubectl:
    """kubectl as a developer who may do anything with plnt.work in `namespace`, only."""
    token = f"dev-{namespace}"
    cluster.standin.add_user(token, token)
    cluster.standin.allow(
        Rule(("*",), user=token, api_groups=("plnt.work",), resources=("*",), namespace=namespace)
    )
    return cluster.kubectl(token, tmp_path / "dev")


@pytest.fixture
def admin(cluster: Cluster, tmp_path: Path) -> Kubectl:
    """kubectl as the cluster's admin (`system:masters`): what the tests inspect it with."""
    cluster.standin.add_user("cluster-admin-token", "cluster-admin", ["system:masters"])
    return cluster.kubectl("cluster-admin-token", tmp_path / "admin")


@pytest.fixture
def ann(cluster: Cluster, namespace: str) -> str:
    """A user who may do anything with plnt's kinds and read Events in `namespace`."""
    token = f"ann-{uuid.uuid4().hex[:6]}"
    user = f"ann-{namespace}"
    cluster.standin.add_user(token, user, ["devs"])
    cluster.standin.allow(
        Rule(("*",), user=user, api_groups=("plnt.work",), resources=("*",), namespace=namespace)
    )
    cluster.standin.allow(
        Rule(("get", "list", "watch"), user=user, api_groups=("", "events.k8s.io"),
             resources=("events",), namespace=namespace)
    )  # fmt: skip
    return token


@pytest.fixture
def token(cluster: Cluster) -> tuple[str, str]:
    namespace = f"r-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(namespace)
    token, user = f"t-{namespace}", f"writer-{namespace}"
    cluster.standin.add_user(token, user)
    cluster.standin.allow(
        Rule(("*",), user=user, api_groups=("plnt.work",), resources=("*",), namespace=namespace)
    )
    return token, namespace
