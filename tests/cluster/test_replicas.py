"""Two `plnt serve` replicas on one etcd: a write acknowledged by one is what the other
serves at once (consistent reads from the watch cache), for GET, LIST and a watch
started from the write's resourceVersion. Both replicas are real child processes."""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from plnt.processes.ports import free_port
from tests.cluster.conftest import Cluster
from tests.cluster.test_aggregated import direct
from tests.support.kube.policy import Rule
from tests.support.plnt_server import ChildProcess

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


@pytest.fixture(scope="module")
def second(cluster: Cluster) -> Iterator[Cluster]:
    """Another replica: the same etcd, cluster and certificate, its own port."""
    assert list(cluster.serve.argv)[:3] == [sys.executable, "-m", "plnt"]
    with another_replica(cluster, "plnt serve (second replica)") as replica:
        yield replica


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


def create(replica: Cluster, token: str, namespace: str, name: str) -> dict[str, object]:
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


def test_a_write_on_one_replica_is_read_at_once_on_the_other(
    cluster: Cluster, second: Cluster, token: tuple[str, str]
) -> None:
    secret, namespace = token
    auth = {"Authorization": f"Bearer {secret}"}
    base = f"/apis/plnt.work/v1/namespaces/{namespace}/plntbackends"
    for round in range(5):  # each read comes right after the other replica's write
        created = create(cluster, secret, namespace, f"b{round}")
        version = created["metadata"]["resourceVersion"]  # type: ignore[index]
        code, got = direct(second, f"{base}/b{round}", headers=auth)
        assert code == 200 and got["metadata"]["resourceVersion"] == version
        code, listed = direct(second, base, headers=auth)
        assert code == 200
        assert [item["metadata"]["name"] for item in listed["items"]] == [
            f"b{i}" for i in range(round + 1)
        ]


def test_a_watch_on_one_replica_from_a_write_on_the_other_delivers_what_follows(
    cluster: Cluster, second: Cluster, token: tuple[str, str]
) -> None:
    secret, namespace = token
    first = create(cluster, secret, namespace, "first")
    version = first["metadata"]["resourceVersion"]  # type: ignore[index]
    create(cluster, secret, namespace, "next")
    path = (
        f"/apis/plnt.work/v1/namespaces/{namespace}/plntbackends"
        f"?watch=1&resourceVersion={version}&timeoutSeconds=5"
    )
    request = urllib.request.Request(
        second.plnt_url + path, headers={"Authorization": f"Bearer {secret}"}
    )
    with urllib.request.urlopen(request, context=second.plnt_context(), timeout=30) as stream:
        event = json.loads(stream.readline())
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "next")
