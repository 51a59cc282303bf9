"""plnt as an aggregated APIService on the kube-apiserver stand-in: what tests/cluster and
the image check (.ci/image) share.

`Cluster` is the running stack of tests/cluster's session fixture (the stand-in, `plnt
serve`, `plnt worker`, the kubelet simulator); `grant_plnt_identities` gives the API
server's and the worker's service accounts what the chart's RBAC gives them.
`direct` calls plnt bypassing the aggregator, `published` puts the fan-out example where
the cluster's worker pulls from, `run_manifest` is a WorkflowRun body, and
`another_replica` serves a second `plnt serve` on the same etcd and cluster.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plnt.apiserver import pki
from plnt.processes.ports import free_port
from tests.support.examples import EXAMPLE
from tests.support.kube import kubelet, standin
from tests.support.kube.policy import Rule
from tests.support.plnt_server import ChildProcess, Kubectl
from tests.support.stack import WorkerProcess, publish

SERVICE = "plnt-apiserver.plnt-system.svc"
APISERVER_USER = "system:serviceaccount:plnt-system:plnt-apiserver"
WORKER_USER = "system:serviceaccount:plnt-system:plnt-worker"
PLNT_KINDS = ("workflowruns", "plntbackends", "invocations")


def grant_plnt_identities(cluster: standin.KubeStandIn) -> dict[str, str]:
    """The tokens of the API server's and the worker's service accounts, with what the
    chart's RBAC gives them (see charts/plnt/templates: auth-delegator, the
    authentication reader, Events; the worker's plnt.work rights)."""
    cluster.add_user("apiserver-token", APISERVER_USER, ["system:serviceaccounts"])
    cluster.add_user("worker-token", WORKER_USER, ["system:serviceaccounts"])
    api, worker = APISERVER_USER, WORKER_USER
    for rule in (
        Rule(("create",), user=api, api_groups=("authentication.k8s.io",),
             resources=("tokenreviews",)),
        Rule(("create",), user=api, api_groups=("authorization.k8s.io",),
             resources=("subjectaccessreviews",)),
        Rule(("get", "list", "watch"), user=api, api_groups=("",), resources=("configmaps",),
             namespace="kube-system"),
        Rule(("create", "patch", "update"), user=api, api_groups=("", "events.k8s.io"),
             resources=("events",)),
        Rule(("get", "list", "watch", "patch", "update"), user=worker, api_groups=("plnt.work",),
             resources=(*PLNT_KINDS, "workflowruns/status", "plntbackends/status",
                        "invocations/status")),
        Rule(("delete",), user=worker, api_groups=("plnt.work",), resources=("invocations",)),
        Rule(("create", "patch"), user=worker, api_groups=("",), resources=("events",)),
        Rule(("*",), user=worker, api_groups=("", "apps", "discovery.k8s.io", "autoscaling",
             "networking.k8s.io", "policy", "monitoring.coreos.com"),
             resources=("deployments", "deployments/scale", "services", "pods", "nodes",
                        "configmaps",
                        "secrets", "endpointslices", "horizontalpodautoscalers", "ingresses",
                        "poddisruptionbudgets", "servicemonitors")),
        Rule(("get", "list", "watch", "create", "patch", "update", "delete"), user=worker,
             api_groups=("gateway.networking.k8s.io",), resources=("httproutes",)),
    ):  # fmt: skip
        cluster.allow(rule)
    return {"apiserver": "apiserver-token", "worker": "worker-token"}


@dataclass
class Cluster:
    """The running stack of tests/cluster (see its conftest's docstring)."""

    standin: standin.KubeStandIn
    directory: Path
    serving_ca: pki.CertificateAuthority
    port: int
    serve: ChildProcess
    worker: WorkerProcess
    kubelet: kubelet.Kubelet | None = None

    @property
    def plnt_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kubectl(self, token: str, home: Path) -> Kubectl:
        """The real kubectl, talking to the stand-in as the user of `token`."""
        cache = home / ".kube" / "cache"
        cache.mkdir(parents=True, exist_ok=True)
        config = self.standin.write_kubeconfig(home / "kubeconfig", token=token)
        return Kubectl(kubeconfig=config, cache_dir=cache)

    def plnt_context(self) -> ssl.SSLContext:
        """A client context that trusts plnt's serving certificate (for direct calls)."""
        context = ssl.create_default_context(cadata=self.serving_ca.cert_pem.decode())
        context.check_hostname = False  # the certificate names the Service, not 127.0.0.1
        return context


def run_manifest(name: str, ref: str, digest: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": {"ref": ref, "digest": digest}},
    }


def published(cluster: Cluster, tag: str) -> tuple[str, str]:
    text = EXAMPLE.read_text().replace("version: 1.0.0", f"version: 1.0.{tag}")
    return publish(cluster.directory / "worker" / "layouts" / "cluster", tag, text)


def direct(
    cluster: Cluster,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    method: str = "GET",
    context: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, Any]]:
    """A request straight to plnt, bypassing the aggregator: (status, JSON body)."""
    request = urllib.request.Request(cluster.plnt_url + path, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(
            request, context=context or cluster.plnt_context(), timeout=30
        ) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


BACKEND = {
    "apiVersion": "plnt.work/v1",
    "kind": "PlntBackend",
    "spec": {"type": "echo"},
}


@contextlib.contextmanager
def another_replica(cluster: Cluster, what: str, *flags: str) -> Iterator[Cluster]:
    """`plnt serve` again (with `flags` added) on the same etcd, cluster and certificate,
    on its own port; stopped when the block ends."""
    argv = list(cluster.serve.argv)
    port = free_port()
    argv[argv.index("--secure-port") + 1] = str(port)
    replica = ChildProcess([*argv, *flags], "plnt is serving at", what)
    replica.start()
    try:
        yield Cluster(
            cluster.standin, cluster.directory, cluster.serving_ca, port, replica, cluster.worker
        )
    finally:
        replica.stop()


def create(replica: Cluster, token: str, namespace: str, name: str) -> dict[str, object]:
    """Create an echo PlntBackend `name` on `replica` directly, as the user of `token`."""
    body = json.dumps({**BACKEND, "metadata": {"name": name}}).encode()
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/plntbackends"
    request = urllib.request.Request(
        replica.plnt_url + path,
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=replica.plnt_context(), timeout=30) as answer:
        assert answer.status == 201
        created: dict[str, object] = json.loads(answer.read())
        return created
