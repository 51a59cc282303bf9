"""`plnt serve --workers 2`: the replica's first process starts a second on the same port
(the same command, told its slot), each composing the cluster's delegated authentication;
a write through one fresh connection is read through the next, whichever worker answers,
and stopping the first leaves no worker and no private directory behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, another_replica, create, direct


@pytest.fixture(scope="module")
def served(cluster: Cluster) -> Iterator[Cluster]:
    """`plnt serve --workers 2` on the cluster fixture's etcd, cluster and certificate."""
    with another_replica(cluster, "plnt serve --workers", "--workers", "2") as replica:
        yield replica


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def _slot_directory(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    [slot] = [item for item in environ if item.startswith(b"PLNT_WORKER_SLOT=")]
    return Path(json.loads(slot.split(b"=", 1)[1])["directory"])


def test_two_workers_serve_one_replica_and_stop_with_it(
    served: Cluster,
    token: tuple[str, str],
) -> None:
    process = served.serve.process
    assert process is not None
    [child] = _children(process.pid)
    directory = _slot_directory(child)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "worker-1.ready").read_text() == str(child)

    secret, namespace = token
    auth = {"Authorization": f"Bearer {secret}"}
    base = f"/apis/plnt.work/v1/namespaces/{namespace}/plntbackends"
    for round in range(8):  # urllib: a fresh connection per request, either worker
        created = create(served, secret, namespace, f"w{round}")
        version = created["metadata"]["resourceVersion"]  # type: ignore[index]
        code, got = direct(served, f"{base}/w{round}", headers=auth)
        assert code == 200 and got["metadata"]["resourceVersion"] == version

    assert served.serve.stop() == 0
    assert not Path(f"/proc/{child}").exists()
    assert not directory.exists()
