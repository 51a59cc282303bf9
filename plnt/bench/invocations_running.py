"""One Invocation benchmark run: Temporal, `plnt up`, the floor's worker, the phases, then
the memory phase on an API server of its own.

Processes: a Temporal dev server (child), `plnt up` with that Temporal and its deploy
worker in-process (child: it also runs every Invocation's workflow), the floor's worker
(`plnt.bench.bareflows`, child, on its own task queue of the same Temporal), and this
process, which publishes a one-step workflow (a template: no backend, no network),
deploys it once and generates the load. The memory phase runs after those have stopped,
on the API server benchmark's server child (`apiserver_serving`: plnt's app with its watch
cache, without sagas) over an etcd of its own, loaded as that benchmark loads it: objects
cloned raw into etcd from one created through the API, here the WorkflowRuns and then a
finished Invocation of this run, status and all. Everything is stopped on the way out,
also on failure or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from temporalio import client as temporal_client

from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_running, bareflows, children, saga, saga_running
from plnt.bench import deploys as deploying
from plnt.bench import invocations as phases
from plnt.bench.settings import ApiBenchmarkSettings, InvocationsBenchmarkSettings
from plnt.client import kubeconfig, transport
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.processes.etcd import EtcdProcess
from plnt.storage.etcd import EtcdStore
from plnt.workflowspec import sources

NAMESPACE = "bench-invocations"
RUN = "trivial"
BARE_QUEUE = "bench-bare-invocations"
TRIVIAL = """\
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: trivial, version: 1.0.0}
inputs:
  type: object
  properties: {topic: {type: string}}
steps:
  - {id: greet, kind: transform, template: "hello {{ inputs.topic }}"}
output: steps.greet.output
smoke: {inputs: {topic: smoke}, expect: {contains: hello}}
"""


@contextlib.asynccontextmanager
async def running_bareflows(address: str) -> AsyncIterator[children.Child]:
    argv = [
        sys.executable, "-m", "plnt.bench.bareflows",
        "--address", address, "--task-queue", BARE_QUEUE,
    ]  # fmt: skip
    async with children.running_child(
        argv, ready=bareflows.READY, what="the bare worker", start_timeout=60, hold_stdin=True
    ) as child:
        yield child


async def bench(settings: InvocationsBenchmarkSettings, workdir: Path) -> phases.InvocationResults:
    """The call phases against `plnt up`, then the memory phase."""
    results = phases.InvocationResults()
    template: dict[str, Any] | None = None
    async with saga_running.running_temporal(workdir) as temporal:
        print(f"temporal {temporal.address}", flush=True)
        async with saga_running.running_plnt(workdir / "state", temporal.address) as plnt:
            print(f"plnt up (pid {plnt.process.pid}), state {plnt.state_dir}", flush=True)
            layout = f"oci-layout:{workdir / 'layout'}:trivial"
            pinned = await sources.publish(TRIVIAL.encode(), layout)
            path = plnt.state_dir / "kubeconfig"
            client = PlntClient.from_kubeconfig(path, namespace=NAMESPACE)
            try:
                await saga_running.create_namespace(client, NAMESPACE)
                seconds, _ = await deploying.deploy_once(
                    client,
                    RUN,
                    namespace=NAMESPACE,
                    ref=layout,
                    digest=str(pinned.digest),
                    within=settings.deploy_timeout,
                )
                print(f"run {RUN} Ready in {seconds:.1f} s", flush=True)
                template = await _calls(client, settings, temporal.address, path, results)
            finally:
                await client.close()
    if settings.rss_objects and template is not None:
        await memory(template, settings, workdir / "memory", results)
    return results


async def _calls(
    client: PlntClient,
    settings: InvocationsBenchmarkSettings,
    temporal_address: str,
    kubeconfig_path: Path,
    results: phases.InvocationResults,
) -> dict[str, Any]:
    """The overhead and throughput phases; a finished Invocation (the memory's template)."""
    connection = kubeconfig.load(kubeconfig_path)
    context = transport.ssl_context(connection)
    assert not isinstance(context, bool)  # plnt up's kubeconfig always names its CA
    server = connection.server
    invoke_url = server + client.object_path(
        WORKFLOWRUNS, RUN, namespace=NAMESPACE, subresource="invoke"
    )
    create_url = server + client.collection_path("invocations", namespace=NAMESPACE)
    finishes = phases.Finishes(client, NAMESPACE)
    temporal = await temporal_client.Client.connect(temporal_address)
    async with (
        harness.https_session(context, pool=settings.concurrency) as session,
        finishes.following(),
        running_bareflows(temporal_address),
    ):

        async def measure(operation: phases.Operation, *, wide: bool) -> harness.PhaseStats:
            return await apiserver_running.measure(
                operation,
                concurrency=settings.concurrency if wide else 1,
                warmup=settings.warmup,
                duration=settings.duration if wide else settings.sequential_duration,
            )

        def durable(prefix: str) -> phases.Operation:
            return phases.durable_call(session, create_url, finishes, run=RUN, prefix=prefix)

        results.sync = await measure(saga.invoke_operation(session, invoke_url), wide=False)
        print(f"sync invoke c=1: {results.sync.ops} calls", flush=True)
        marked = await phases.read_checkpoints(client)
        results.durable = await measure(durable("one"), wide=False)
        results.checkpoints = await phases.read_checkpoints(client) - marked
        print(f"durable c=1: {results.durable.ops} Invocations", flush=True)
        results.durable_wide = await measure(durable("wide"), wide=True)
        print(f"durable c={settings.concurrency}: {results.durable_wide.ops}", flush=True)
        bare = phases.bare_execution(temporal, task_queue=BARE_QUEUE, prefix=uuid.uuid4().hex[:8])
        results.bare_wide = await measure(bare, wide=True)
        print(f"bare temporal c={settings.concurrency}: {results.bare_wide.ops}", flush=True)
    path = client.object_path("invocations", "one-000000", namespace=NAMESPACE)
    found: dict[str, Any] = (await client.request("GET", path)).json()
    return found


async def memory(
    template: dict[str, Any],
    settings: InvocationsBenchmarkSettings,
    workdir: Path,
    results: phases.InvocationResults,
) -> None:
    """RSS of an API server with `rss_objects` runs, then as many finished Invocations."""
    count = settings.rss_objects
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    loading = ApiBenchmarkSettings(objects=count, concurrency=30)
    async with (
        EtcdProcess(workdir / "etcd", unsafe_no_fsync=True) as etcd,
        EtcdStore(etcd.endpoint, key_prefix="/registry") as raw,
        apiserver_running.running_server(etcd, workdir / "pki", cprofile=None) as server,
        harness.https_session(context, pool=loading.concurrency) as session,
    ):
        pid = server.child.process.pid
        await apiserver_running.create_namespaces(session, server.base)
        results.rss_started_bytes = apiserver_running.resident_bytes(pid)
        await apiserver_running.preload(raw, session, server.base, loading)
        results.rss_runs_bytes = apiserver_running.resident_bytes(pid)
        namespace = apiserver_running.LIST_NS
        values = clones(template, namespace, count)
        results.template_bytes = len(values[0])

        async def put(seq: int) -> bool:
            if seq < count:
                await raw.create(f"/plnt.work/invocations/{namespace}/inv-{seq:06d}", values[seq])
            return True

        await harness.run_closed_loop(
            put, concurrency=loading.concurrency, duration=0.0, min_ops=count
        )
        url = f"{server.base}/apis/plnt.work/v1/namespaces/{namespace}/invocations"
        await harness.wait_for_count(session, url, count=count, within=120)
        results.rss_loaded_bytes = apiserver_running.resident_bytes(pid)
        results.rss_objects = count
        print(f"memory: {count} runs and {count} Invocations cached", flush=True)


def clones(template: dict[str, Any], namespace: str, count: int) -> list[bytes]:
    """`count` copies of a finished Invocation as etcd stores them, each its own name and uid."""
    obj = json.loads(json.dumps(template))
    meta = obj["metadata"]
    meta.pop("resourceVersion", None)
    meta["namespace"] = namespace
    values = []
    for index in range(count):
        meta["name"] = f"inv-{index:06d}"
        meta["uid"] = str(uuid.uuid4())
        values.append(json.dumps(obj, separators=(",", ":"), sort_keys=True).encode())
    return values
