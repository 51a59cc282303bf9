"""Two `plnt serve` replicas on one etcd: a write acknowledged by one is what the other
serves at once (consistent reads from the watch cache), for GET, LIST and a watch
started from the write's resourceVersion. Both replicas are real child processes."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, another_replica, create, direct


@pytest.fixture(scope="module")
def second(cluster: Cluster) -> Iterator[Cluster]:
    """Another replica: the same etcd, cluster and certificate, its own port."""
    assert list(cluster.serve.argv)[:3] == [sys.executable, "-m", "plnt"]
    with another_replica(cluster, "plnt serve (second replica)") as replica:
        yield replica


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
