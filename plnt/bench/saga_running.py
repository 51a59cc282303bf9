"""One deploy saga benchmark run: Temporal, `plnt up`, the deploys, and the invoke phases.

Three processes share the machine: a Temporal dev server (`plnt.processes.temporal`, a
child), `plnt up` (a child, with that Temporal and the deploy worker in its own process,
state in the run's directory) and this process, which publishes the example workflow to
an OCI image layout, creates WorkflowRuns and generates the invoke load. The runners are
the children `plnt up` starts for each deploy. Two bare proxies (`plnt.bench.bareproxy`,
children) are the floors: one over plain HTTP, one over HTTPS with the API server's
serving certificate from `STATE/pki`.

`plnt up` runs as a command, not imported: the benchmark observes plnt the way a user
does, and sits beside `plnt.standalone` in the layers, not above it.

Every deploy is a new WorkflowRun: created, watched until Ready, then deleted (and
waited for) before the next, except the last, whose runner takes the invoke load.
Everything is stopped on the way out, also on failure or Ctrl-C: the runs are deleted,
`plnt up` stopped, `plnt down --state-dir` stops any runner left, then Temporal stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import children, cputime, runner_starts, saga
from plnt.bench import deploys as deploying
from plnt.bench.settings import SagaBenchmarkSettings
from plnt.client import errors as client_errors
from plnt.client import kubeconfig, transport
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.processes.ports import free_port
from plnt.processes.temporal import TemporalDevServer
from plnt.workflowspec import sources

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fanout.workflow.yaml"
NAMESPACE = "bench-saga"
READY = "plnt is ready"
API_PROCESS = "plnt.standalone.apiprocess"
"""The module `plnt up --workers N` runs its sibling API processes as (named, not
imported: the benchmarks do not import the standalone composition)."""


@dataclass
class PlntUp:
    """`plnt up` as a child process (see `running_plnt`)."""

    child: children.Child
    state_dir: Path

    @property
    def process(self) -> asyncio.subprocess.Process:
        return self.child.process


@contextlib.asynccontextmanager
async def running_plnt(
    state_dir: Path,
    temporal_address: str,
    *,
    deploy_worker: bool = True,
    api_processes: int = 1,
    start_timeout: float = 90.0,
) -> AsyncIterator[PlntUp]:
    """`plnt up` with the given Temporal and (unless not `deploy_worker`) its in-process
    deploy worker, on `api_processes` API server processes (given explicitly: a
    benchmark's numbers must not depend on the machine's core count); `plnt down`
    afterwards."""
    argv = [
        sys.executable, "-m", "plnt", "up", "--state-dir", str(state_dir),
        "--port", str(free_port()), "--temporal-address", temporal_address,
        "--workers", str(api_processes),
    ]  # fmt: skip
    if not deploy_worker:
        argv.append("--no-worker")
    try:
        async with children.running_child(
            argv, ready=READY, what="plnt up", start_timeout=start_timeout, cwd=REPO
        ) as child:
            yield PlntUp(child, state_dir)
    finally:
        down = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "plnt", "down", "--state-dir", str(state_dir),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, cwd=REPO,
        )  # fmt: skip
        await down.wait()


@contextlib.asynccontextmanager
async def running_temporal(workdir: Path) -> AsyncIterator[TemporalDevServer]:
    """A headless Temporal dev server with its database under `workdir`."""
    server = TemporalDevServer(workdir / "temporal" / "temporal.db", ui_port=None)
    try:
        await server.astart()
        yield server
    finally:
        await server.astop()


async def deploys(
    client: PlntClient,
    settings: SagaBenchmarkSettings,
    *,
    ref: str,
    digest: str,
    results: saga.SagaResults,
) -> tuple[str, dict[str, object]]:
    """`settings.deploys` deploys, each deleted before the next but the last: (name, object)."""
    last: tuple[str, dict[str, object]] | None = None
    for index in range(settings.deploys):
        name = f"bench-{index:03d}"
        seconds, obj = await deploying.deploy_once(
            client,
            name,
            namespace=NAMESPACE,
            ref=ref,
            digest=digest,
            within=settings.deploy_timeout,
            evaluation_cases=settings.evaluation_cases,
        )
        results.deploy_seconds.append(seconds)
        gate = saga.evaluation_milliseconds(obj)
        if gate is not None:
            results.evaluation_ms.append(gate)
        print(f"deploy {index + 1}/{settings.deploys}: {name} Ready in {seconds:.3f} s", flush=True)
        if index + 1 < settings.deploys:
            await deploying.delete_and_wait(client, name, namespace=NAMESPACE)
        else:
            last = (name, obj)
    assert last is not None  # settings.deploys >= 1
    return last


async def delete_all(client: PlntClient) -> None:
    """Delete every run of the benchmark's namespace and wait until they are gone."""
    path = client.collection_path(WORKFLOWRUNS, namespace=NAMESPACE)
    names = [str(item["metadata"]["name"]) for item in await client.list_all(path)]
    await asyncio.gather(
        *(deploying.delete_and_wait(client, name, namespace=NAMESPACE, within=60) for name in names)
    )


def invoke_settings(settings: SagaBenchmarkSettings) -> saga.InvokeSettings:
    return saga.InvokeSettings(
        concurrency=settings.concurrency,
        duration=settings.duration,
        sequential_duration=settings.sequential_duration,
        warmup=settings.warmup,
    )


async def create_namespace(client: PlntClient, name: str = NAMESPACE) -> None:
    """The benchmark's namespace: a standalone server refuses runs in a missing one."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    with contextlib.suppress(client_errors.AlreadyExists):
        await client.request("POST", "/api/v1/namespaces", json=body)


async def bench(settings: SagaBenchmarkSettings, workdir: Path) -> saga.SagaResults:
    """Start Temporal and `plnt up` under `workdir`, deploy, then run the invoke phases."""
    results = saga.SagaResults(evaluation_cases=settings.evaluation_cases)
    async with running_temporal(workdir) as temporal:
        print(f"temporal {temporal.address}", flush=True)
        async with running_plnt(
            workdir / "state", temporal.address, api_processes=settings.api_processes
        ) as plnt:
            print(
                f"plnt up (pid {plnt.process.pid}, --workers {settings.api_processes}), "
                f"state {plnt.state_dir}",
                flush=True,
            )
            layout = f"oci-layout:{workdir / 'layout'}:fanout"
            pinned = await sources.publish(EXAMPLE.read_bytes(), layout)
            kubeconfig_path = plnt.state_dir / "kubeconfig"
            client = PlntClient.from_kubeconfig(kubeconfig_path, namespace=NAMESPACE)
            try:
                await create_namespace(client)
                if settings.runner_starts:
                    results.runner_starts = await runner_starts.measure(
                        EXAMPLE, workdir, count=settings.runner_starts
                    )
                name, obj = await deploys(
                    client, settings, ref=layout, digest=str(pinned.digest), results=results
                )
                if settings.duration > 0:
                    results.endpoint = deploying.runner_endpoint(obj)
                    results.invoke = await _invoke(
                        client, settings, plnt=plnt, name=name, endpoint=results.endpoint
                    )
            finally:
                try:
                    await delete_all(client)
                finally:
                    await client.close()
    return results


def invoke_meter(plnt_up: int, *, endpoint: str, floors: dict[str, int]) -> cputime.Meter:
    """The invoke phases' processes: `plnt up` (its API server and in-process deploy worker,
    and under `--workers N` its sibling API processes; not etcd or the fork server), the
    runner behind `endpoint` (found by its listening port: the
    fork server started it), the etcd `plnt up` runs, each floor's proxy by its key, and
    this generator."""
    port = urllib.parse.urlsplit(endpoint).port
    runner = cputime.listening_pid(port) if port is not None else None
    etcd = cputime.children_named(plnt_up, "etcd")
    copies = set(cputime.children_running(plnt_up, API_PROCESS))
    others = {stat.pid for stat in cputime.all_stats() if stat.ppid == plnt_up} - copies
    watched = [
        cputime.Watched(saga.PLNT_UP, plnt_up, tree=True, prune=frozenset(others)),
        cputime.Watched(saga.RUNNER, runner),
        cputime.Watched(saga.ETCD, etcd[0] if etcd else None),
        cputime.Watched(saga.GENERATOR, os.getpid()),
    ]
    watched += [cputime.Watched(key, pid) for key, pid in floors.items()]
    return cputime.Meter(watched)


async def _invoke(
    client: PlntClient, settings: SagaBenchmarkSettings, *, plnt: PlntUp, name: str, endpoint: str
) -> saga.InvokeResults:
    """Invoke `name` through the API, directly on its runner, and through both floors."""
    connection = kubeconfig.load(plnt.state_dir / "kubeconfig")
    context = transport.ssl_context(connection)
    assert not isinstance(context, bool)  # plnt up's kubeconfig always names its CA
    api_url = connection.server + client.object_path(
        WORKFLOWRUNS, name, namespace=NAMESPACE, subresource="invoke"
    )
    pool = settings.concurrency
    async with (
        children.running_bare_proxy(endpoint) as (bare_url, bare_pid),
        children.running_bare_proxy(endpoint, tls=pki.Pki.at(plnt.state_dir / "pki")) as (
            bare_tls_url,
            bare_tls_pid,
        ),
        harness.https_session(context, pool=pool) as api,
        harness.https_session(context, pool=pool) as bare_tls,
        saga.http_session(pool=pool) as direct,
    ):
        meter = invoke_meter(
            plnt.process.pid,
            endpoint=endpoint,
            floors={saga.BARE.key: bare_pid, saga.BARE_TLS.key: bare_tls_pid},
        )
        return await saga.invoke_phases(
            api,
            direct,
            api_url=api_url,
            direct_url=f"{endpoint}/invoke",
            settings=invoke_settings(settings),
            meter=meter,
            floors=[
                saga.FloorRoute(saga.BARE, f"{bare_url}/invoke", direct),
                saga.FloorRoute(saga.BARE_TLS, f"{bare_tls_url}/invoke", bare_tls),
            ],
        )
