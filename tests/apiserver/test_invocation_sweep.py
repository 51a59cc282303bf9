"""A deleted Invocation loses its workflow even when Temporal was down at the delete and
the API server restarted before Temporal was back; and a workflow whose Invocation is
gone, or was recreated with another uid, ends by itself without writing the new one.

Real etcd, a real Temporal dev server of this module (stopped and started again on the
same port and database) and real API servers in-process, the second on the first's
keyspace and PKI. The first test runs no worker: a workflow without one stays Running,
so the cancel the sweep asks for is read in its history, exactly as Temporal recorded it.
The second runs an in-process worker with plnt's real invocation activities.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio import client as temporal_client
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from plnt.client import Connection, PlntClient
from plnt.processes.temporal import TemporalDevServer
from plnt.sagas import starter
from plnt.sagas.invoking import activities as invoking
from plnt.sagas.invoking import workflow as inv
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.invocations import INVOCATIONS, invocation
from tests.support.waiting import eventually

CANCEL_REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED


@pytest.fixture
async def temporal(tmp_path: Path) -> AsyncIterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path / "temporal" / "t.db", ui_port=None)
    await server.astart()
    try:
        yield server
    finally:
        await server.astop()


def task_queue() -> str:
    return f"sweep-{uuid.uuid4().hex[:8]}"


async def create(api: Api, name: str) -> dict[str, Any]:
    reply = await api.call("POST", INVOCATIONS, body=invocation(name))
    assert reply.status == 201, reply.text
    created: dict[str, Any] = reply.json
    return created


def workflow_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return inv.workflow_id(meta["namespace"], meta["name"], meta["uid"])


async def cancel_requested(client: temporal_client.Client, workflow: str) -> bool:
    history = await client.get_workflow_handle(workflow).fetch_history()
    return any(event.event_type == CANCEL_REQUESTED for event in history.events)


async def test_a_delete_made_while_temporal_was_down_cancels_the_workflow_after_a_restart(
    etcd_endpoint: str, tmp_path: Path, temporal: TemporalDevServer
) -> None:
    queue = task_queue()
    prefix = f"/t-{uuid.uuid4().hex[:12]}"
    observer = await starter.connect(temporal.address)
    first = starter.TemporalDeployControl(await starter.connect(temporal.address), task_queue=queue)
    # Another installation's invocation on the same Temporal namespace: never this one's.
    foreign = starter.TemporalDeployControl(observer, task_queue=task_queue())
    stranger = invocation("stranger")
    stranger["metadata"].update(namespace="default", uid="uid-of-another-installation")
    await foreign.start_invocation(stranger)

    async with serving(etcd_endpoint, tmp_path, deploy=first, etcd_prefix=prefix) as api:
        assert (await api.call("POST", BASE, body=workflowrun("summarize"))).status == 201
        doomed, kept = await create(api, "doomed"), await create(api, "kept")

        async def both_listed() -> bool:
            names = {found.name for found in await first.running_invocations()}
            return names == {"doomed", "kept"}

        await eventually(both_listed, what="both invocation workflows listed as running")
        await temporal.astop()
        deleted = await api.call("DELETE", f"{INVOCATIONS}/doomed")
        assert deleted.status == 200, deleted.text
        assert "could not be cancelled yet" in deleted.headers["Warning"]
    # The API server is gone, and with it the cancel it kept in memory. The next one
    # starts before Temporal is back (a lazy client: the first call connects).
    lazy = await temporal_client.Client.connect(temporal.address, lazy=True)
    second = starter.TemporalDeployControl(lazy, task_queue=queue)
    async with serving(etcd_endpoint, tmp_path, deploy=second, etcd_prefix=prefix):
        await temporal.arestart()
        observer = await starter.connect(temporal.address)
        await eventually(
            lambda: cancel_requested(observer, workflow_of(doomed)),
            within=90,
            what="the deleted invocation's workflow cancelled",
        )
        assert not await cancel_requested(observer, workflow_of(kept))
        stranger_id = inv.workflow_id("default", "stranger", "uid-of-another-installation")
        assert not await cancel_requested(observer, stranger_id)


async def test_a_workflow_whose_invocation_was_recreated_ends_without_writing_the_new_one(
    etcd_endpoint: str, tmp_path: Path, temporal: TemporalDevServer
) -> None:
    queue = task_queue()
    client = await starter.connect(temporal.address)
    control = starter.TemporalDeployControl(client, task_queue=queue)
    # No saga control in the server: nothing cancels the workflow when its object goes.
    async with serving(etcd_endpoint, tmp_path) as api:
        connection = Connection(
            server=api.url,
            ca_data=api.pki.ca_cert.read_bytes(),
            client_certificate_data=api.pki.admin_cert.read_bytes(),
            client_key_data=api.pki.admin_key.read_bytes(),
        )
        plnt = PlntClient(connection)
        activities = invoking.InvocationActivities(api=plnt)
        assert (await api.call("POST", BASE, body=workflowrun("summarize"))).status == 201
        old = await create(api, "again")
        await control.start_invocation(old)  # the run never gets ready: it waits, retrying
        async with Worker(
            client,
            task_queue=queue,
            workflows=[inv.InvocationWorkflow],
            activities=activities.all(),
        ):

            async def waiting() -> bool:
                reply = await api.call("GET", f"{INVOCATIONS}/again")
                return "waiting" in str((reply.json.get("status") or {}).get("message"))

            await eventually(waiting, what="the workflow waiting for a ready revision")
            assert (await api.call("DELETE", f"{INVOCATIONS}/again")).status == 200
            new = await create(api, "again")
            handle = client.get_workflow_handle(workflow_of(old), result_type=inv.InvocationOutcome)
            outcome = await asyncio.wait_for(handle.result(), 60)
        await activities.close()
        await plnt.close()
        assert (outcome.phase, outcome.reason) == ("Failed", inv.Reason.INVOCATION_GONE)
        reread = (await api.call("GET", f"{INVOCATIONS}/again")).json
        assert reread["metadata"]["uid"] == new["metadata"]["uid"]
        assert not reread.get("status", {}).get("phase") or reread["status"]["phase"] == "Pending"
        assert "message" not in (reread.get("status") or {})
