"""`python -m plnt.bench agents`: agent turns and maps, each against the floor beneath it.

    python -m plnt.bench agents [--invocations 30] [--model-ms 40] [--tool-ms 10]
                                [--echo-ms 50] [--json FILE]

One run starts, in this process, a scripted OpenAI-compatible model (each chat turn asks
for the `add` tool until the conversation holds three results, then answers: four turns)
and the tool it calls, each answering after a fixed delay; then etcd, the API server child
(as `plnt.bench proxy` does) and two runner processes: the agent on that model, and a map
of 16 elements with `maxParallel: 4` on the echo backend. It measures, in that one run:

* **the runner's own time per agent turn**: of each invocation's agent step, its
  duration less the time spent waiting on the model and the tool (the trace's
  `backendMs`), over its turns; p50 (target ≤ 2 ms);
* **a 4-turn agent through the API server** (`POST …/invoke`, HTTPS, the admin
  certificate) against the floor: the same four model calls and three tool calls made
  one after another straight from here; p50 over p50 (target ≤ 1.05);
* **the map** (`POST {runner}/invoke`) against four waves of four concurrent calls of the
  same echo backend, made here; p50 over p50 (target ≤ 1.1).

Every invocation asks a different question, so no step cache answers. Numbers are printed
(and written as JSON), never asserted; a miss is not a non-zero exit. Errors:
`BenchmarkError` (a child did not start, or an invocation failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from plnt.apiserver import pki
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_running, children, local_serving, proxy, reports
from plnt.processes.etcd import EtcdProcess
from plnt.runner import backends

NAMESPACE = "bench-agents"
NAME = "agent"
TURNS = 4
ITEMS, PARALLEL = 16, 4
TURN_TARGET_MS = 2.0
AGENT_TARGET = 1.05
MAP_TARGET = 1.1

AGENT_SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: agent}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
tools:
  - name: add
    description: Adds two integers.
    idempotent: true
    parameters:
      type: object
      properties: {a: {type: integer}, b: {type: integer}}
      required: [a, b]
    http: {url: "TOOL/add"}
steps:
  - id: solve
    kind: model
    messages: [{role: user, content: "{{ inputs.q }}"}]
    tools: [add]
    maxTurns: 8
    cache: false
output: steps.solve.output
"""

MAP_SPEC = f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: map}}
inputs: {{type: object, properties: {{xs: {{type: array}}}}, required: [xs]}}
steps:
  - id: each
    kind: model
    forEach: inputs.xs
    maxParallel: {PARALLEL}
    messages: [{{role: user, content: "{{{{ item }}}}"}}]
    cache: false
output: steps.each.output
"""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    invocations: int = 30
    model_ms: float = 40.0
    tool_ms: float = 10.0
    echo_ms: float = 50.0


@dataclass
class AgentResults:
    turn_runner_ms: list[float] = field(default_factory=list)
    through_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    map_ms: list[float] = field(default_factory=list)
    waves_ms: list[float] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    tool_calls: list[int] = field(default_factory=list)


def p50(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@contextlib.asynccontextmanager
async def scripted(settings: AgentSettings) -> AsyncIterator[str]:
    """The model and the tool, on one local server; yields its base URL."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        await asyncio.sleep(settings.model_ms / 1000.0)  # the model's time
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if results < TURNS - 1:
            arguments = json.dumps({"a": results, "b": 1})
            message["tool_calls"] = [
                {
                    "id": f"call_{results}",
                    "type": "function",
                    "function": {"name": "add", "arguments": arguments},
                }
            ]
        else:
            message["content"] = f"done after {results} calls"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"choices": [choice], "usage": usage})

    async def add(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(settings.tool_ms / 1000.0)  # the tool's time
        return web.json_response({"sum": body["a"] + body["b"]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/add", add)
    async with local_serving.serving(app) as url:
        yield url


async def timed_invoke(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    async with session.post(url, json={"inputs": inputs}) as response:
        body: dict[str, Any] = await response.json()
        if response.status != 200:
            raise harness.BenchmarkError(f"{url}: {response.status} {body}")
    return (time.perf_counter() - began) * 1000.0, body


async def floor_agent(session: aiohttp.ClientSession, base: str, question: str) -> float:
    """The agent's four model calls and three tool calls, one after another, from here."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    began = time.perf_counter()
    for _ in range(TURNS):
        async with session.post(
            f"{base}/v1/chat/completions", json={"model": "m", "messages": messages}
        ) as response:
            message = (await response.json())["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            break
        messages.append(message)
        for call in calls:
            async with session.post(
                f"{base}/add", json=json.loads(call["function"]["arguments"])
            ) as response:
                result = await response.text()
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return (time.perf_counter() - began) * 1000.0


async def floor_waves(echo: backends.Backend, question: int) -> float:
    """Four waves of four concurrent calls of the echo backend, from here."""
    began = time.perf_counter()
    for wave in range(ITEMS // PARALLEL):
        await asyncio.gather(
            *(
                echo.chat(
                    backends.ChatRequest(
                        messages=[{"role": "user", "content": f"{question}-{wave}-{i}"}],
                        model="echo",
                    )
                )
                for i in range(PARALLEL)
            )
        )
    return (time.perf_counter() - began) * 1000.0


async def bench(settings: AgentSettings, workdir: Path) -> AgentResults:
    results = AgentResults()
    paths = pki.ensure_pki(workdir / "pki")
    context = harness.client_ssl_context(
        ca_cert=paths.ca_cert, client_cert=paths.admin_cert, client_key=paths.admin_key
    )
    async with scripted(settings) as model_url:
        agent_spec = workdir / "agent.yaml"
        agent_spec.write_text(AGENT_SPEC.replace("TOOL", model_url))
        map_spec = workdir / "map.yaml"
        map_spec.write_text(MAP_SPEC)
        agent_backend = ("--backend-type", "openai", "--endpoint", f"{model_url}/v1")
        echo_backend = ("--backend-type", "echo", "--latency-ms", str(settings.echo_ms))
        async with (
            EtcdProcess(workdir / "etcd", unsafe_no_fsync=True) as etcd,
            apiserver_running.running_server(etcd, workdir / "pki", cprofile=None) as server,
            children.running_runner(agent_spec, *agent_backend, "--model", "m") as agent,
            children.running_runner(map_spec, *echo_backend) as mapper,
            harness.https_session(context, pool=4) as api,
            aiohttp.ClientSession() as direct,
        ):
            await proxy.publish(api, server.base, agent.url, namespace=NAMESPACE, name=NAME)
            invoke = f"{server.base}{harness.resource_path(NAMESPACE, NAME)}/invoke"
            echo = backends.EchoBackend(latency_seconds=settings.echo_ms / 1000.0)
            for n in range(settings.invocations + 2):  # two to warm up
                through, _ = await timed_invoke(api, invoke, {"q": f"q{n}"})
                _, direct_body = await timed_invoke(direct, f"{agent.url}/invoke", {"q": f"d{n}"})
                floor = await floor_agent(direct, model_url, f"f{n}")
                mapped, _ = await timed_invoke(
                    direct, f"{mapper.url}/invoke", {"xs": [f"{n}-{i}" for i in range(ITEMS)]}
                )
                waves = await floor_waves(echo, n)
                if n < 2:
                    continue
                (step,) = direct_body["trace"]
                turns = len(step.get("turns") or [])
                results.turns.append(turns)
                results.tool_calls.append(int(step.get("toolCalls") or 0))
                own = float(step["durationMs"]) - float(step["backendMs"])
                results.turn_runner_ms.append(own / max(turns, 1))
                results.through_ms.append(through)
                results.floor_ms.append(floor)
                results.map_ms.append(mapped)
                results.waves_ms.append(waves)
    return results


def report(results: AgentResults) -> list[str]:
    turn = p50(results.turn_runner_ms)
    agent = p50(results.through_ms) / p50(results.floor_ms) if results.floor_ms else 0.0
    mapped = p50(results.map_ms) / p50(results.waves_ms) if results.waves_ms else 0.0
    return [
        f"agent: {p50(results.turns):.0f} turns, {p50(results.tool_calls):.0f} tool calls"
        " per invocation",
        f"runner time per turn p50 {turn:.3f} ms (target <= {TURN_TARGET_MS} ms)"
        f"  {reports.verdict(turn <= TURN_TARGET_MS)}",
        f"4-turn agent via API p50 {p50(results.through_ms):.1f} ms, its calls made directly"
        f" p50 {p50(results.floor_ms):.1f} ms: {agent:.3f}x (target <= {AGENT_TARGET}x)"
        f"  {reports.verdict(agent <= AGENT_TARGET)}",
        f"forEach {ITEMS} x maxParallel {PARALLEL} p50 {p50(results.map_ms):.1f} ms,"
        f" {ITEMS // PARALLEL} waves direct p50 {p50(results.waves_ms):.1f} ms: {mapped:.3f}x"
        f" (target <= {MAP_TARGET}x)  {reports.verdict(mapped <= MAP_TARGET)}",
    ]


def as_json(results: AgentResults, settings: AgentSettings) -> dict[str, Any]:
    return {
        "settings": {
            "invocations": settings.invocations,
            "modelMs": settings.model_ms,
            "toolMs": settings.tool_ms,
            "echoMs": settings.echo_ms,
        },
        "turnsPerCall": p50(results.turns),
        "toolCallsPerCall": p50(results.tool_calls),
        "runnerMsPerTurnP50": p50(results.turn_runner_ms),
        "agentThroughApiP50Ms": p50(results.through_ms),
        "agentFloorP50Ms": p50(results.floor_ms),
        "mapP50Ms": p50(results.map_ms),
        "wavesP50Ms": p50(results.waves_ms),
    }


def parse_args(argv: Sequence[str] | None = None) -> tuple[AgentSettings, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m plnt.bench agents", description=__doc__)
    parser.add_argument("--invocations", type=int, default=30)
    parser.add_argument("--model-ms", type=float, default=40.0)
    parser.add_argument("--tool-ms", type=float, default=10.0)
    parser.add_argument("--echo-ms", type=float, default=50.0)
    parser.add_argument("--json", type=Path, help="Write the results here as JSON.")
    args = parser.parse_args(argv)
    settings = AgentSettings(
        invocations=args.invocations,
        model_ms=args.model_ms,
        tool_ms=args.tool_ms,
        echo_ms=args.echo_ms,
    )
    return settings, args.json


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_file = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plnt-bench-agents-") as workdir:
        results = asyncio.run(bench(settings, Path(workdir)))
    reports.emit(report(results), as_json(results, settings), started=started, json_file=json_file)
    return 0
