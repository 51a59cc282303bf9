"""One create burst run: a Temporal dev server, `plnt up --no-worker`, the floor and plnt.

The burst has a Temporal server of its own (configured as `plnt up` configures its
embedded one, `plnt.processes.temporal`), so its workflows, which no worker ever runs,
cannot reach the deploy phases' worker. `plnt up` runs without a worker for the same
reason and so that, like the floor, it has no workflow tasks run while it is measured.

The floor is this process's own Temporal client doing what `plnt.sagas.starter` does
for a create: one signal-with-start with a start signal, here of a workflow type no
worker polls, with a payload of the same shape (the run's spec). The API side is an
HTTPS POST of a WorkflowRun with the admin certificate, as kubectl would send it.

Errors: `BenchmarkError` when Temporal's visibility does not list the started workflows in
time; `ChildFailed` from the children.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from temporalio import client as temporal_client
from temporalio.service import RPCError

from plnt.bench import apiserver as harness
from plnt.bench import cores, cputime, saga_running, starts
from plnt.client import kubeconfig, transport
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.processes.temporal import TemporalDevServer

NAMESPACE = "bench-burst"
BARE_TYPE = "BenchBareStart"
BARE_QUEUE = "bench-bare-starts"
LISTED_WITHIN_S = 60.0


def bare_start(client: temporal_client.Client, *, round_name: str) -> starts.Operation:
    """Signal-with-start of workflow `bare/{round_name}/{index}` (no worker polls it)."""
    spec = harness.workflowrun("x")["spec"]

    async def operation(index: int) -> starts.Answer:
        name = f"{round_name}-{index:05d}"
        try:
            await client.start_workflow(
                BARE_TYPE,
                {"run": {"namespace": NAMESPACE, "name": name}},
                id=f"bare/{round_name}/{name}",
                task_queue=BARE_QUEUE,
                start_signal="desire",
                start_signal_args=[{"generation": 1, "spec": spec}],
            )
        except RPCError:
            return False, False
        return True, False

    return operation


def api_create(session: aiohttp.ClientSession, url: str, *, round_name: str) -> starts.Operation:
    """POST WorkflowRun `{round_name}-{index}`: 201 succeeds; notes a Warning in the answer."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}

    async def operation(index: int) -> starts.Answer:
        body = json.dumps(harness.workflowrun(f"{round_name}-{index:05d}")).encode()
        try:
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                return response.status == 201, "Warning" in response.headers
        except (aiohttp.ClientError, TimeoutError):
            return False, False

    return operation


def index_of(workflow_id: str, prefix: str) -> int | None:
    """The burst index in `workflow_id` when it starts with `prefix` (then `…-NNNNN`)."""
    if not workflow_id.startswith(prefix):
        return None
    name = workflow_id[len(prefix) :].split("/", 1)[0]
    digits = name.rsplit("-", 1)[-1]
    return int(digits) if digits.isdigit() else None


async def listed(client: temporal_client.Client, prefix: str, expected: int) -> int:
    """How many workflows with ids under `prefix` Temporal's visibility lists, waiting
    (with a deadline) until it lists `expected`: visibility is written after the start."""
    deadline = time.monotonic() + LISTED_WITHIN_S
    delay = 0.1
    while True:
        found = {
            index
            async for execution in client.list_workflows()
            if (index := index_of(execution.id, prefix)) is not None
        }
        if len(found) >= expected or time.monotonic() > deadline:
            return len(found)
        await asyncio.sleep(delay)  # poll with backoff until visibility caught up
        delay = min(delay * 2, 1.0)


def measured_processes(temporal: int | None, plnt_up: int) -> dict[str, int]:
    """The processes whose CPU the burst reports: Temporal, `plnt up`, the etcd it runs
    (its child named `etcd`, found in /proc) and this generator."""
    found = {"temporal": temporal} if temporal is not None else {}
    found["plnt up"] = plnt_up
    for etcd in cputime.children_named(plnt_up, "etcd"):
        found["etcd"] = etcd
    found["generator"] = os.getpid()
    return found


@contextlib.asynccontextmanager
async def _api_session(
    state_dir: Path, pool: int
) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """An HTTPS session with plnt up's admin certificate, and the collection's URL."""
    connection = kubeconfig.load(state_dir / "kubeconfig")
    context = transport.ssl_context(connection)
    assert not isinstance(context, bool)  # plnt up's kubeconfig always names its CA
    client = PlntClient.from_kubeconfig(state_dir / "kubeconfig", namespace=NAMESPACE)
    try:
        await saga_running.create_namespace(client, NAMESPACE)
        url = connection.server + client.collection_path(WORKFLOWRUNS, namespace=NAMESPACE)
    finally:
        await client.close()
    async with harness.https_session(context, pool=pool) as session:
        yield session, url


async def bench(settings: starts.BurstSettings, workdir: Path) -> starts.BurstResults:
    """Temporal and `plnt up --no-worker` under `workdir`; floor and plnt rounds alternating."""
    results = starts.BurstResults(settings)
    async with saga_running.running_temporal(workdir / "burst") as temporal:
        with cores.own_core_if(settings.own_core, temporal.pid, "temporal") as results.cores:
            await _alternate(settings, workdir, temporal, results)
    return results


async def _alternate(
    settings: starts.BurstSettings,
    workdir: Path,
    temporal: TemporalDevServer,
    results: starts.BurstResults,
) -> None:
    """`plnt up --no-worker` on `temporal`, then floor and plnt rounds into `results`."""
    client = await temporal_client.Client.connect(temporal.address)
    async with (
        saga_running.running_plnt(
            workdir / "burst-state", temporal.address, deploy_worker=False
        ) as plnt,
        _api_session(plnt.state_dir, settings.concurrency) as (session, url),
    ):
        processes = measured_processes(temporal.pid, plnt.process.pid)

        async def floor(round_name: str) -> None:
            operation = bare_start(client, round_name=round_name)
            stats = await starts.burst(
                f"bare starts {round_name}", operation, settings, processes=processes
            )
            stats.listed = await listed(client, f"bare/{round_name}/", stats.started)
            results.floors.append(stats)
            results.rounds.append(stats)

        for number in range(1, settings.rounds + 1):
            await floor(f"r{number}")
            round_name = f"r{number}"
            operation = api_create(session, url, round_name=round_name)
            stats = await starts.burst(
                f"plnt creates {round_name}", operation, settings, processes=processes
            )
            # The saga of run NAME is `workflowrun/NS/NAME/UID` (`sagas.values`).
            prefix = f"workflowrun/{NAMESPACE}/{round_name}-"
            stats.listed = await listed(client, prefix, stats.started)
            results.plnt.append(stats)
            results.rounds.append(stats)
        await floor(f"r{settings.rounds + 1}")
