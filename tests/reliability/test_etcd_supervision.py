"""etcd SIGKILLed under ~100 writes/s: `plnt up` restarts it, and nothing acknowledged is lost.

A real `plnt up` (API machinery only) takes PlntBackend creates at about 100 a second
while a watch opened before the first write follows the namespace. etcd, its child, is
killed with SIGKILL mid-load; plnt is not restarted. Afterwards every write that was
answered 2xx is stored with its content, writes were served again soon after the kill
(the recovery time is printed, not held to a tight bound), `/readyz` failed while etcd
was down and passes again, and the watch saw every object exactly once, in
resourceVersion order, with nothing missing between before and after the kill.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import PlntServer
from tests.support.processes import live_processes
from tests.support.waiting import eventually

WRITE_PERIOD = 0.01
"""One create every 10 ms: about 100 writes a second (the load, not synchronisation)."""
NAMESPACE = "etcd-kill"
SEQUENCE = "reliability.plnt.work/sequence"


@dataclass(frozen=True, slots=True)
class Write:
    index: int
    started: float
    ended: float
    status: int
    """The HTTP status; 0 when no answer came."""
    resource_version: str | None = None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    with PlntServer(tmp_path_factory.mktemp("plnt-etcd-kill")) as srv:
        create_namespace(srv.url, srv.pki_dir, NAMESPACE)
        yield srv


def etcd_pids(state: Path) -> set[int]:
    return live_processes(f"--data-dir={state / 'etcd'}")


def backend(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": f"b-{index:05d}", "annotations": {SEQUENCE: str(index)}},
        "spec": {"type": "echo", "models": [f"model-{index}"]},
    }


async def test_a_sigkilled_etcd_is_restarted_and_no_acknowledged_write_or_watch_event_is_lost(
    server: PlntServer,
) -> None:
    loop = asyncio.get_running_loop()
    (old_etcd,) = etcd_pids(server.state_dir)
    async with PlntClient.from_kubeconfig(server.kubeconfig) as client:
        path = client.collection_path("plntbackends", namespace=NAMESPACE)
        start_rv = (await client.request("GET", path)).json()["metadata"]["resourceVersion"]
        watched: list[dict[str, Any]] = []

        async def watch() -> None:
            params = {"resourceVersion": start_rv}
            async for event in client.watch(path, params=params):
                watched.append({"type": event.type, "object": event.object})

        writes: list[Write] = []

        async def write(index: int) -> None:
            started = loop.time()
            try:
                reply = await client.request("POST", path, json=backend(index), request_timeout=20)
            except client_errors.ApiError as error:
                writes.append(Write(index, started, loop.time(), error.code))
            except client_errors.TransportError:
                writes.append(Write(index, started, loop.time(), 0))
            else:
                rv = reply.json()["metadata"]["resourceVersion"]
                writes.append(Write(index, started, loop.time(), reply.status, rv))

        stop_writing = asyncio.Event()

        async def load() -> None:
            async with asyncio.TaskGroup() as group:
                index = 0
                while not stop_writing.is_set():
                    group.create_task(write(index))
                    index += 1
                    await asyncio.sleep(WRITE_PERIOD)  # the write rate

        readiness: list[tuple[float, bool]] = []

        async def probe_readiness() -> None:
            while True:
                try:
                    await client.request("GET", "/readyz", request_timeout=5)
                    readiness.append((loop.time(), True))
                except client_errors.ClientError:
                    readiness.append((loop.time(), False))
                await asyncio.sleep(0.02)  # the probe rate

        def acknowledged(after: float = 0.0) -> list[Write]:
            return [w for w in writes if 200 <= w.status < 300 and w.started >= after]

        watcher = asyncio.create_task(watch())
        prober = asyncio.create_task(probe_readiness())
        writer = asyncio.create_task(load())
        try:
            await eventually(lambda: len(acknowledged()) >= 100, within=30, what="100 writes")
            killed_at = loop.time()
            os.kill(old_etcd, signal.SIGKILL)
            first = await eventually(
                lambda: min(acknowledged(killed_at), key=lambda w: w.ended, default=None),
                within=60,
                what="a write acknowledged after the kill",
            )
            recovery = first.ended - killed_at
            await eventually(
                lambda: len(acknowledged(first.ended)) >= 100,
                within=30,
                what="100 more writes after the recovery",
            )
        finally:
            stop_writing.set()
            await writer
            prober.cancel()

        acked = {f"b-{w.index:05d}": w for w in acknowledged()}
        failed = [w for w in writes if not 200 <= w.status < 300]
        print(
            f"\netcd SIGKILL: {len(writes)} writes, {len(acked)} acknowledged, "
            f"{len(failed)} refused; writes served again {recovery:.2f} s after the kill"
        )

        # Every acknowledged write is stored, with its content, at the version answered.
        stored = {o["metadata"]["name"]: o for o in await client.list_all(path)}
        assert set(acked) <= set(stored)
        for name, w in acked.items():
            assert stored[name]["metadata"]["annotations"][SEQUENCE] == str(w.index)
            assert stored[name]["metadata"]["resourceVersion"] == w.resource_version
        # Refusals while etcd was down were 503s (a Status; 429 if too many piled up).
        refusals = {w.status for w in failed}
        assert 503 in refusals, "no write was refused: the kill did not land under load"
        assert refusals <= {503, 429}, sorted(refusals)

        # The watch opened before the kill saw every stored object once, in order.
        await eventually(
            lambda: {e["object"]["metadata"]["name"] for e in watched} >= set(stored),
            within=30,
            what="the watch to see every stored object",
        )
        watcher.cancel()
        names = [e["object"]["metadata"]["name"] for e in watched]
        assert {e["type"] for e in watched} == {"ADDED"}
        assert len(names) == len(set(names)), "an event was delivered twice"
        assert set(names) == set(stored), "the watch and the store disagree"
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in watched]
        assert versions == sorted(versions)
        for event in watched:
            meta = event["object"]["metadata"]
            assert meta["resourceVersion"] == stored[meta["name"]]["metadata"]["resourceVersion"]

        # /readyz failed while etcd was down and passes again.
        assert any(not ok for at, ok in readiness if at > killed_at)
        await client.request("GET", "/readyz")

        # One restart: a new etcd on the same data directory, logged and counted.
        (new_etcd,) = etcd_pids(server.state_dir)
        assert new_etcd != old_etcd
        pattern = rf"etcd \(pid {old_etcd}\) exited with code -9 \(SIGKILL\); restarting it in"
        assert re.search(pattern, "".join(server.output)), "".join(server.output)[-2000:]
        metrics = (await client.request("GET", "/metrics")).body.decode()
        assert 'plnt_child_restarts_total{child="etcd"} 1.0' in metrics
