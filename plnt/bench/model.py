"""`python -m plnt.bench model`: a real model, direct and through plnt, and its cold start.

    python -m plnt.bench model [--requests 6] [--tokens 16] [--own-core] [--json FILE]

One run, on the pinned Gemma 3 270M (`plnt.processes.models.GEMMA3_270M`, the `llm` extra):

1. **Cold start**, as `plnt up --model` starts the model (`standalone.modelserving.start`:
   the same steps, called here from `plnt.processes`): the weights assembled from their
   package into a fresh directory, verified against plnt's pin, the server spawned and
   loaded (`ModelServer.started`), then the first streamed request to its first token.
2. Etcd, the API server child (`apiserver_serving`, HTTPS with plnt's PKI) and one runner
   process of a one-step completion workflow on that server (its step cache off), published
   as a WorkflowRun's only traffic target (the proxy bench's `publish`).
3. At concurrency 1 and 4, `--requests` streamed requests per path (at least one batch of
   `concurrency`), in rounds: each round sends one batch down every path in turn, so load
   drifting during the run falls on every path alike. All ask for the same continuation at
   temperature 0: **direct** to the model server (`/v1/completions`), straight to the
   **runner**'s `/v1/completions` (plain HTTP: what the runner's hop adds, without the API
   server's), through plnt's **proxy** (`…/workflowruns/NAME/proxy/v1/completions`), and a
   full workflow **invoke** (`…/workflowruns/NAME/invoke?stream=true`, NDJSON). Two floors
   have the shapes of the runner and proxy paths with no plnt code in them
   (`plnt.bench.bareproxy`, a process each, on plnt's event loop): **relay**, one bare
   plain-HTTP hop in front of the model server, and **relays**, a bare HTTPS hop (the API
   server's certificate) in front of that one. On a machine whose processes sleep while the
   model computes, every hop pays for waking its process up, before the call and again at
   the first token; the floors measure that, so `own … over …` is what plnt's code adds
   beyond it. Per request: time to first token (from sending to the first event carrying
   text) and decode speed (tokens after the first over the time from the first token to the
   last).

Printed: p50 TTFT and tokens/s per path and concurrency, then per concurrency each path's
added TTFT p50 (as ms and as % of direct) and its tok/s ratio against direct, and the
runner's and proxy's added TTFT over their floors. The server generates for one request at
a time, so at concurrency 4 the TTFT includes the wait behind the others. Numbers are
printed, never asserted. Errors: `BenchmarkError`.

`--own-core` gives the model server the first core and plnt, etcd and the client the rest
(`plnt.bench.cores`), as on a machine whose model has a device of its own: on two shared
cores the model's generation thread holds one, and each hop through plnt waits for the
other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from plnt.api.envelopes import invoke_envelope
from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import (
    apiserver_running,
    children,
    continuations,
    cores,
    proxy,
    reports,
)
from plnt.bench.saga import http_session
from plnt.processes import models, weights
from plnt.processes.etcd import EtcdProcess
from plnt.processes.modelserver import ModelServer

PIN = models.GEMMA3_270M
CONCURRENCIES = (1, 4)
PATHS = ("direct", "relay", "runner", "relays", "proxy", "invoke")
FLOORS = {"runner": "relay", "proxy": "relays"}
"""Each plnt path and the bare relay chain of its shape: what any Python hop costs."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    requests: int = 6
    tokens: int = 16
    own_core: bool = False
    """The model server on the first core, this process and every other child on the rest:
    a machine whose model has a device (or cores) of its own."""


@dataclass(frozen=True, slots=True)
class Stream:
    """One streamed answer: seconds to its first token, and its decode rate (None: < 2)."""

    ttft: float
    tokens_per_second: float | None


@dataclass
class Phase:
    streams: list[Stream] = field(default_factory=list)
    errors: int = 0

    def absorb(self, other: Phase) -> None:
        """Add another batch of the same path's streams."""
        self.streams.extend(other.streams)
        self.errors += other.errors

    def ttft_p50_ms(self) -> float:
        return harness.percentile(sorted(s.ttft for s in self.streams), 0.5) * 1000.0

    def tokens_per_second(self) -> float:
        rates = sorted(s.tokens_per_second for s in self.streams if s.tokens_per_second)
        return harness.percentile(rates, 0.5) if rates else 0.0


@dataclass
class ColdStart:
    assemble: float = 0.0
    verify: float = 0.0
    load: float = 0.0
    first_token: float = 0.0

    @property
    def total(self) -> float:
        return self.assemble + self.verify + self.load + self.first_token


@dataclass
class ModelResults:
    cold: ColdStart = field(default_factory=ColdStart)
    phases: dict[str, Phase] = field(default_factory=dict)
    """Keyed `PATH c=N`."""
    cores: str = ""
    """How `--own-core` split the cores; empty without it."""

    def phase(self, path: str, concurrency: int) -> Phase:
        return self.phases.setdefault(f"{path} c={concurrency}", Phase())


def _pieces(line: bytes, *, ndjson: bool) -> int:
    """Tokens in one line of a stream: an SSE completion event's text, an NDJSON delta."""
    line = line.strip()
    if ndjson:
        return 1 if line.startswith(b"{") and b'"type":"delta"' in line.replace(b" ", b"") else 0
    if not line.startswith(b"data:") or line == b"data: [DONE]":
        return 0
    event = json.loads(line[5:])
    choices = event.get("choices") if isinstance(event, dict) else None
    return 1 if choices and choices[0].get("text") else 0


async def stream_once(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], *, ndjson: bool
) -> Stream | None:
    """Send one streamed request; its timings (None when it failed or streamed nothing)."""
    began = time.perf_counter()
    first: float | None = None
    last = began
    tokens = 0
    try:
        async with session.post(url, json=body) as answer:
            if answer.status != 200:
                await answer.read()
                return None
            async for line in answer.content:
                count = _pieces(line, ndjson=ndjson)
                if count:
                    now = time.perf_counter()
                    first = now if first is None else first
                    last, tokens = now, tokens + count
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    if first is None:
        return None
    rate = (tokens - 1) / (last - first) if tokens > 1 and last > first else None
    return Stream(first - began, rate)


async def measure(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    *,
    ndjson: bool,
    concurrency: int,
    requests: int,
) -> Phase:
    """`requests` streams, `concurrency` at a time in a closed loop."""
    phase = Phase()
    left = iter(range(requests))

    async def sender() -> None:
        for _ in left:
            found = await stream_once(session, url, body, ndjson=ndjson)
            if found is None:
                phase.errors += 1
            else:
                phase.streams.append(found)

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return phase


async def cold_start(workdir: Path, settings: ModelSettings) -> tuple[ModelServer, ColdStart]:
    """Start the model as `plnt up --model` does, timed, and time its first token."""
    cold = ColdStart()
    began = time.perf_counter()
    directory = workdir / "weights"
    directory.mkdir()
    path = await weights.aassemble(PIN, directory=directory)
    cold.assemble = time.perf_counter() - began
    server = ModelServer(PIN, path, log_file=workdir / "model.log")
    await server.astart()
    assert server.started is not None
    cold.verify, cold.load = server.started.verify, server.started.load
    async with http_session(pool=1) as session:
        first = await stream_once(
            session, f"{server.endpoint}/completions", _direct_body(settings), ndjson=False
        )
    if first is None:
        server.stop()
        raise harness.BenchmarkError("the model server's first request failed")
    cold.first_token = first.ttft
    return server, cold


def _direct_body(settings: ModelSettings) -> dict[str, Any]:
    return {
        "model": PIN.name,
        "prompt": continuations.PROMPT,
        "max_tokens": settings.tokens,
        "temperature": 0,
        "seed": 0,
        "stream": True,
    }


@contextlib.asynccontextmanager
async def running_runner(spec: Path, endpoint: str) -> AsyncIterator[str]:
    """A runner process of `spec` on the model server, step cache off; its base URL."""
    options = [
        "--backend-type", "openai", "--endpoint", endpoint, "--model", PIN.name,
        "--cache-max-entries", "0",
    ]  # fmt: skip
    async with children.running_runner(spec, *options) as child:
        yield child.url


async def bench(settings: ModelSettings, workdir: Path) -> ModelResults:
    results = ModelResults()
    server, results.cold = await cold_start(workdir, settings)
    try:
        with cores.own_core_if(settings.own_core, server.pid, "model server") as results.cores:
            await _stream_every_path(settings, workdir, server.endpoint, results)
    finally:
        await server.astop()
    return results


async def _stream_every_path(
    settings: ModelSettings, workdir: Path, endpoint: str, results: ModelResults
) -> None:
    """Etcd, the API server, the runner and the two relays in front of the model server at
    `endpoint`; then every path's streams, interleaved, into `results`."""
    spec = workdir / "continue.workflow.yaml"
    spec.write_text(continuations.spec_text(settings.tokens))
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    pool = max(CONCURRENCIES)
    async with (
        EtcdProcess(workdir / "etcd", unsafe_no_fsync=True) as etcd,
        apiserver_running.running_server(etcd, workdir / "pki", cprofile=None) as api,
        running_runner(spec, endpoint) as runner,
        children.running_bare_proxy(endpoint.removesuffix("/v1")) as (relay, _),
        children.running_bare_proxy(relay, tls=paths) as (relays, _),
        harness.https_session(context, pool=pool) as tls,
        http_session(pool=pool) as plain,
    ):
        await proxy.publish(tls, api.base, runner)
        run = f"{api.base}/apis/plnt.work/v1/namespaces/{proxy.NAMESPACE}/workflowruns/"
        run += proxy.NAME
        direct = _direct_body(settings)
        completion = {
            "model": continuations.WORKFLOW,
            "prompt": continuations.PROMPT,
            "stream": True,
        }
        targets: dict[str, tuple[aiohttp.ClientSession, str, dict[str, Any], bool]] = {
            "direct": (plain, f"{endpoint}/completions", direct, False),
            "relay": (plain, f"{relay}/v1/completions", direct, False),
            "runner": (plain, f"{runner}/v1/completions", completion, False),
            "relays": (tls, f"{relays}/v1/completions", direct, False),
            "proxy": (tls, f"{run}/proxy/v1/completions", completion, False),
            "invoke": (
                tls,
                f"{run}/invoke?stream=true",
                invoke_envelope({"prefix": continuations.PROMPT}),
                True,
            ),
        }
        for concurrency in CONCURRENCIES:
            # Interleaved: each round sends one batch down every path in turn, so a change
            # in the machine's load during the run falls on all paths alike instead of on
            # whichever path ran while it lasted.
            rounds = max(1, -(-max(settings.requests, concurrency) // concurrency))
            for _ in range(rounds):
                for name in PATHS:
                    session, url, body, ndjson = targets[name]
                    batch = await measure(
                        session,
                        url,
                        body,
                        ndjson=ndjson,
                        concurrency=concurrency,
                        requests=concurrency,
                    )
                    results.phase(name, concurrency).absorb(batch)


def report(results: ModelResults) -> list[str]:
    """The printed lines: the cold start split, each phase, then the ratios per concurrency."""
    cold = results.cold
    lines = [
        f"cold start to first token {cold.total:.2f} s: weights assembly {cold.assemble:.2f} s, "
        f"verification {cold.verify:.2f} s, server load {cold.load:.2f} s, "
        f"first request {cold.first_token:.2f} s"
    ]
    if results.cores:
        lines.append(f"cores: {results.cores}")
    for key, phase in results.phases.items():
        lines.append(
            f"{key:<10} ttft p50 {phase.ttft_p50_ms():8.1f} ms, "
            f"{phase.tokens_per_second():6.1f} tok/s ({len(phase.streams)} streams, "
            f"{phase.errors} errors)"
        )
    for concurrency in CONCURRENCIES:
        direct = results.phase("direct", concurrency)
        for name in PATHS[1:]:
            through = results.phase(name, concurrency)
            added = through.ttft_p50_ms() - direct.ttft_p50_ms()
            share = added / direct.ttft_p50_ms() * 100.0 if direct.ttft_p50_ms() else 0.0
            ratio = (
                through.tokens_per_second() / direct.tokens_per_second()
                if direct.tokens_per_second()
                else 0.0
            )
            lines.append(
                f"ratio {name}/direct c={concurrency}: added ttft p50 {added:+.1f} ms "
                f"({share:+.0f}% of direct), tok/s ratio {ratio:.2f}"
            )
        for name, floor in FLOORS.items():
            own = results.phase(name, concurrency).ttft_p50_ms()
            own -= results.phase(floor, concurrency).ttft_p50_ms()
            lines.append(f"own {name} over {floor} c={concurrency}: added ttft p50 {own:+.1f} ms")
    return lines


def as_json(results: ModelResults, settings: ModelSettings) -> dict[str, Any]:
    return {
        "settings": dataclasses.asdict(settings),
        "coldStart": {
            "assemble": results.cold.assemble,
            "verify": results.cold.verify,
            "load": results.cold.load,
            "firstToken": results.cold.first_token,
            "total": results.cold.total,
        },
        "cores": results.cores,
        "phases": {
            key: {
                "ttftP50Ms": phase.ttft_p50_ms(),
                "tokensPerSecond": phase.tokens_per_second(),
                "streams": len(phase.streams),
                "errors": phase.errors,
            }
            for key, phase in results.phases.items()
        },
    }


def parse_args(argv: Sequence[str] | None = None) -> tuple[ModelSettings, Path | None]:
    p = argparse.ArgumentParser(
        prog="python -m plnt.bench model", description=(__doc__ or "").split("\n")[0]
    )
    p.add_argument("--requests", type=int, default=6, help="streams per path and concurrency")
    p.add_argument("--tokens", type=int, default=16, help="tokens each answer generates")
    p.add_argument("--json", type=Path, help="also write the results to this file")
    p.add_argument(
        "--own-core",
        action="store_true",
        help="the model server alone on the first core, plnt and the client on the rest",
    )
    args = p.parse_args(argv)
    settings = ModelSettings(requests=args.requests, tokens=args.tokens, own_core=args.own_core)
    return settings, args.json


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    weights.require_extra(PIN)
    with tempfile.TemporaryDirectory(prefix="plnt-bench-model-") as workdir:
        results = asyncio.run(bench(settings, Path(workdir)))
    reports.write(report(results), as_json(results, settings), json_path)
    return 0
