"""Two API server replicas on one etcd: a write through one is read at once through the other.

Both replicas are built by `build_app` with the same etcd, key prefix and PKI, and
served over real HTTPS on free loopback ports, as two pods behind the aggregator
would be. Reads with resourceVersion "" are consistent reads from each replica's
watch cache, so no retry loop is needed anywhere below: the first read must see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.standalone.serving import write_kubeconfig
from tests.support import tls
from tests.support.api_server import BASE, Api, workflowrun
from tests.support.plnt_server import Kubectl


@dataclass
class Replicas:
    a: Api
    b: Api


@contextlib.asynccontextmanager
async def _replica(settings: ServerSettings, paths: pki_module.Pki) -> AsyncIterator[Api]:
    application = app_module.build_app(settings)
    async with (
        tls.serve_https(application, tls.server_context(paths)) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Api(url=url, session=session, pki=paths, settings=settings)


@pytest.fixture
async def replicas(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Replicas]:
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=f"/t-{uuid.uuid4().hex[:12]}",
        pki_dir=tmp_path / "pki",
        bookmark_interval_seconds=0.2,
    )
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with _replica(settings, paths) as a, _replica(settings, paths) as b:
        yield Replicas(a, b)


def _kubectl(api: Api, tmp_path: Path, name: str) -> Kubectl:
    kubeconfig = tmp_path / f"{name}.kubeconfig"
    write_kubeconfig(kubeconfig, server=api.url, paths=api.pki)
    return Kubectl(kubeconfig=kubeconfig, cache_dir=tmp_path / f"{name}-home" / "cache")


async def test_kubectl_create_on_one_replica_is_read_at_once_by_kubectl_on_the_other(
    replicas: Replicas, tmp_path: Path
) -> None:
    on_a, on_b = _kubectl(replicas.a, tmp_path, "a"), _kubectl(replicas.b, tmp_path, "b")
    manifest = json.dumps(workflowrun("from-a"))
    done = await asyncio.to_thread(on_a.run, "create", "-f", "-", "-o", "json", input=manifest)
    created = json.loads(done.stdout)
    version = created["metadata"]["resourceVersion"]
    got = await asyncio.to_thread(on_b.json, "get", "workflowruns", "from-a")
    assert got["metadata"]["resourceVersion"] == version
    listed = await asyncio.to_thread(on_b.json, "get", "workflowruns")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["from-a"]


async def test_updates_and_deletes_on_one_replica_are_read_at_once_on_the_other(
    replicas: Replicas,
) -> None:
    a, b = replicas.a, replicas.b
    for i in range(10):
        name = f"run-{i}"
        created = await a.call("POST", BASE, body=workflowrun(name))
        assert created.status == 201, created.text
        version = created.json["metadata"]["resourceVersion"]
        got = await b.call("GET", f"{BASE}/{name}")
        assert got.status == 200
        assert got.json["metadata"]["resourceVersion"] == version
        patched = await a.call(
            "PATCH",
            f"{BASE}/{name}",
            body={"metadata": {"labels": {"step": str(i)}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patched.status == 200, patched.text
        newer = patched.json["metadata"]["resourceVersion"]
        got = await b.call("GET", f"{BASE}/{name}")
        assert got.json["metadata"]["resourceVersion"] == newer
        listed = await b.call("GET", BASE)
        versions = {
            item["metadata"]["name"]: item["metadata"]["resourceVersion"]
            for item in listed.json["items"]
        }
        assert versions[name] == newer
        deleted = await a.call("DELETE", f"{BASE}/{name}")
        assert deleted.status == 200, deleted.text
        assert (await b.call("GET", f"{BASE}/{name}")).status == 404
        listed = await b.call("GET", BASE)
        assert name not in {item["metadata"]["name"] for item in listed.json["items"]}


async def test_resource_version_0_reads_on_the_other_replica_answer_without_error(
    replicas: Replicas,
) -> None:
    for i in range(5):
        assert (await replicas.a.call("POST", BASE, body=workflowrun(f"r{i}"))).status == 201
        listed = await replicas.b.call("GET", BASE, params={"resourceVersion": "0"})
        assert listed.status == 200, listed.text
        assert listed.json["kind"] == "WorkflowRunList"


async def test_a_watch_on_one_replica_from_a_write_on_the_other_delivers_the_next_change(
    replicas: Replicas,
) -> None:
    a, b = replicas.a, replicas.b
    created = await a.call("POST", BASE, body=workflowrun("watched"))
    version = created.json["metadata"]["resourceVersion"]
    params = {"watch": "1", "resourceVersion": version}
    async with (
        asyncio.timeout(20),
        b.session.get(b.url + BASE, params=params) as stream,
    ):
        assert stream.status == 200
        patched = await a.call(
            "PATCH",
            f"{BASE}/watched",
            body={"metadata": {"labels": {"seen": "yes"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        event = json.loads(await stream.content.readline())
    assert event["type"] == "MODIFIED"
    assert (
        event["object"]["metadata"]["resourceVersion"]
        == (patched.json["metadata"]["resourceVersion"])
    )
    assert event["object"]["metadata"]["labels"] == {"seen": "yes"}
