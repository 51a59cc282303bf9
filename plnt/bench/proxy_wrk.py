"""The proxy benchmark's C-client phase: chats through the API server's proxy and
straight to the runner, sent by `wrk` (`plnt.bench.wrk`).

Why beside the Python client: that client saturates its own core before the API server
does, so its figures mix plnt's cost with the client's. wrk holds exactly one request in
flight per connection: at 1 connection it measures a lone proxied chat, at 16 what
batching buys. wrk has no client certificate, so the API server is reached with the
benchmark's bearer token; the runner is called over plain HTTP, as the proxy calls it.

Every request asks a different question (`wrk.numbered_script`, and a run number in the
text), so the runner's step cache never answers and the echo backend runs each time. The
floor of a proxied chat is the runner's CPU per direct chat: what answering costs without
plnt in front.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from plnt.bench import cputime, wrk

SIDES = {"proxy": "through the proxy", "direct": "runner direct"}
CPU_TARGET = 1.0
"""The API server's CPU per proxied chat over the runner's per direct chat, at most."""
SERVER, RUNNER = "server", "runner"
"""The `cputime.Meter` groups of the API server (its process tree) and of the runner."""
MARKER = "@SEQUENCE@"


def chat_script(run: int, *, headers: Mapping[str, str]) -> str:
    """A chat completion per request, each with its own question (run `run`, request n)."""
    body = json.dumps(
        {"model": "chat", "messages": [{"role": "user", "content": f"wrk {run} q{MARKER}"}]}
    ).encode()
    return wrk.numbered_script(
        body=body, marker=MARKER, headers={**headers, "Content-Type": "application/json"}
    )


async def measure(
    *,
    proxy_url: str,
    direct_url: str,
    token: str,
    connections: Sequence[int],
    duration: float,
    warmup: float,
    meter: cputime.Meter,
    workdir: Path,
) -> list[wrk.WrkPhase]:
    """At each connection count: chats through the proxy, then straight to the runner,
    each after its own warm-up (its own questions too); WrkMissing when wrk is not
    installed."""
    runs = itertools.count()
    sides = {
        "proxy": (proxy_url, {"Authorization": f"Bearer {token}"}),
        "direct": (direct_url, {}),
    }
    phases = []
    for count in connections:
        for side, (url, headers) in sides.items():
            warm = chat_script(next(runs), headers=headers) if warmup > 0 else None
            phase = await wrk.measured(
                url,
                op="chat",
                side=side,
                connections=count,
                duration=duration,
                warmup=warmup,
                lua=chat_script(next(runs), headers=headers),
                warmup_lua=warm,
                meter=meter,
                workdir=workdir,
            )
            phases.append(phase)
    return phases


def cpu_rows(phases: Sequence[wrk.WrkPhase]) -> dict[str, cputime.CpuRow]:
    """Per connection count: the API server's CPU per proxied chat against the runner's
    per direct chat, with the runner's CPU during the proxied run beside them."""
    found = {(p.side, p.connections): p for p in phases}
    rows = {}
    for (side, count), through in found.items():
        if side != "proxy":
            continue
        direct = found.get(("direct", count))
        rows[f"chat c={count}"] = cputime.CpuRow(
            f"wrk chat c={count}",
            plnt="API server process",
            plnt_ms=through.cpu_ms(SERVER),
            floor="runner per direct call",
            floor_ms=direct.cpu_ms(RUNNER) if direct is not None else None,
            target=CPU_TARGET,
            beside=(("runner during plnt's phase", through.cpu_ms(RUNNER)),),
        )
    return rows


def lines(phases: Sequence[wrk.WrkPhase]) -> list[str]:
    """A row per run (rate, latency, CPU per request of the side's own process), then the
    CPU rows and, per connection count, the p50 overhead of a proxied chat."""
    if not phases:
        return []
    out = [wrk.HEADER]
    for phase in phases:
        own = phase.cpu_ms(SERVER if phase.side == "proxy" else RUNNER)
        out.append(wrk.row("chat", SIDES[phase.side], phase, cpu_ms=own))
    found = {(p.side, p.connections): p for p in phases}
    for (side, count), through in found.items():
        direct = found.get(("direct", count))
        if side != "proxy" or direct is None:
            continue
        if through.result.p50_ms is not None and direct.result.p50_ms is not None:
            overhead = through.result.p50_ms - direct.result.p50_ms
            out.append(f"  wrk chat c={count:<3} overhead p50 {overhead:.3f} ms")
    out += [row.line() for row in cpu_rows(phases).values()]
    return out


def as_json(phases: Sequence[wrk.WrkPhase]) -> dict[str, object]:
    return {
        "runs": [
            {
                "side": p.side,
                "connections": p.connections,
                "rate": p.result.rate,
                "requests": p.result.requests,
                "errors": p.result.errors,
                "p50Ms": p.result.p50_ms,
                "p99Ms": p.result.p99_ms,
                "cpuMsPerRequest": {name: p.cpu_ms(name) for name in p.cpu},
            }
            for p in phases
        ],
        "cpu": {key: row.as_json() for key, row in cpu_rows(phases).items()},
    }
