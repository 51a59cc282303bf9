"""How the invocation workflow's activities write an Invocation's status
(`plnt.sagas.invoking.recording`): one patch that sets only the named fields while the object is
the same one, and nothing at all on an Invocation recreated under the same name.

Real etcd and a real API server in-process; the writes go through `plnt.client` as a
worker's do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plnt.client import Connection, PlntClient
from plnt.sagas.invoking import recording
from plnt.sagas.invoking import workflow as inv
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.invocations import INVOCATIONS, invocation


@pytest.fixture
async def served(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[tuple[Api, PlntClient]]:
    async with serving(etcd_endpoint, tmp_path) as api:
        connection = Connection(
            server=api.url,
            ca_data=api.pki.ca_cert.read_bytes(),
            client_certificate_data=api.pki.admin_cert.read_bytes(),
            client_key_data=api.pki.admin_key.read_bytes(),
        )
        plnt = PlntClient(connection)
        try:
            assert (await api.call("POST", BASE, body=workflowrun("summarize"))).status == 201
            yield api, plnt
        finally:
            await plnt.close()


async def create(api: Api, name: str) -> dict[str, Any]:
    reply = await api.call("POST", INVOCATIONS, body=invocation(name))
    assert reply.status == 201, reply.text
    created: dict[str, Any] = reply.json
    return created


def ref_of(obj: dict[str, Any]) -> inv.InvocationRef:
    meta = obj["metadata"]
    return inv.InvocationRef(meta["namespace"], meta["name"], meta["uid"])


async def test_a_status_write_sets_and_removes_only_the_fields_it_names(
    served: tuple[Api, PlntClient],
) -> None:
    api, plnt = served
    ref = ref_of(await create(api, "w"))
    running = {"phase": "Running", "revision": 3, "digest": "sha256:aa", "attempts": 1}
    assert await recording.write(plnt, ref, running)
    assert await recording.write(plnt, ref, {"digest": None, "attempts": 2, "message": "again"})
    status = (await api.call("GET", f"{INVOCATIONS}/w")).json["status"]
    assert status["phase"] == "Running" and status["revision"] == 3
    assert status["attempts"] == 2 and status["message"] == "again"
    assert "digest" not in status and "observedGeneration" not in status
    assert [c["type"] for c in status["conditions"]] == ["Reconciling"]  # kept from the create
    assert await recording.write(plnt, ref, {"phase": "Succeeded"}, finished=True)
    status = (await api.call("GET", f"{INVOCATIONS}/w")).json["status"]
    assert status["phase"] == "Succeeded" and status["observedGeneration"] == 1


async def test_a_status_write_to_a_recreated_invocation_writes_nothing(
    served: tuple[Api, PlntClient],
) -> None:
    api, plnt = served
    old = ref_of(await create(api, "again"))
    assert (await api.call("DELETE", f"{INVOCATIONS}/again")).status == 200
    assert not await recording.write(plnt, old, {"phase": "Succeeded"}, finished=True)
    new = await create(api, "again")
    assert not await recording.write(plnt, old, {"phase": "Succeeded"}, finished=True)
    reread = (await api.call("GET", f"{INVOCATIONS}/again")).json
    assert reread["metadata"]["uid"] == new["metadata"]["uid"]
    assert reread["status"] == new["status"]
