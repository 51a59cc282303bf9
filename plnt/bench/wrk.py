"""`wrk`, a C load generator, as the benchmarks' second client beside the Python one.

Why: a Python client on this machine saturates its own core long before a server does,
so it sends requests one at a time and measures a server as it behaves then; its own
CPU also competes with the server's. wrk (Debian's `wrk`) costs a few microseconds per
request, keeps every connection alive and holds exactly one request in flight per
connection, so `connections` is the concurrency: at 1 it measures a lone request, at 16
what batching buys. It cannot present a TLS client certificate, so plnt is reached with
a bearer token (the benchmark's server reads a token file, as `plnt up` does).

A request other than a plain GET (a method, a body, headers) goes in a Lua script that
wrk runs (`script`). `run` starts wrk for a duration and parses its summary; `measured`
is one run of a benchmark's wrk phase, the same for every benchmark: a warm-up, then a
run with CPU metered around it (`plnt.bench.cputime`), kept as a `WrkPhase`; `row` is its
printed line.

Errors: `WrkMissing` when wrk is not installed (the caller prints `MISSING` and skips
its rows); `WrkFailed` when wrk exits non-zero or prints no summary.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from plnt.bench import cputime

MISSING = "wrk is not installed (Debian: apt-get install wrk): the C-client (wrk) rows are skipped"
"""What a benchmark prints instead of its wrk rows when `binary()` finds none."""
HEADER = "wrk (C client, keep-alive, one request in flight per connection, 1 thread):"
"""The line above a benchmark's wrk rows."""


class WrkMissing(RuntimeError):
    """wrk is not on PATH."""


class WrkFailed(RuntimeError):
    """wrk ran but gave no usable summary."""


def binary() -> str | None:
    """The wrk executable on PATH, or None."""
    return shutil.which("wrk")


def lua_string(text: str) -> str:
    """`text` as a Lua string literal (quoted, with backslashes, quotes and controls escaped)."""
    out = []
    for char in text:
        if char in '\\"':
            out.append("\\" + char)
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\{ord(char):03d}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def script(*, method: str = "GET", body: bytes = b"", headers: Mapping[str, str] = {}) -> str:
    """A wrk Lua script that sends every request with `method`, `body` and `headers`."""
    lines = [f"wrk.method = {lua_string(method)}"]
    if body:
        lines.append(f"wrk.body = {lua_string(body.decode())}")
    for name, value in headers.items():
        lines.append(f"wrk.headers[{lua_string(name)}] = {lua_string(value)}")
    return "\n".join(lines) + "\n"


def numbered_script(
    *, method: str = "POST", body: bytes, marker: str, headers: Mapping[str, str] = {}
) -> str:
    """A wrk Lua script like `script`'s whose every request carries `body` with `marker`
    replaced by the request's number (one more each request of a run): for a server that
    answers a body it has seen from its cache (a runner's step cache), so every request
    reaches it."""
    before, found, after = body.decode().partition(marker)
    if not found:
        raise ValueError(f"body: holds no marker {marker!r}")
    return (
        script(method=method, headers=headers)
        + "\n".join(
            [
                "local sequence = 0",
                "request = function()",
                "  sequence = sequence + 1",
                f"  return wrk.format(nil, nil, nil, {lua_string(before)} .. sequence"
                f" .. {lua_string(after)})",
                "end",
            ]
        )
        + "\n"
    )


@dataclass(frozen=True, slots=True)
class WrkResult:
    """wrk's summary: completed requests, failures, seconds, and latency quantiles (ms)."""

    requests: int
    errors: int
    """Non-2xx/3xx answers plus socket errors (connect, read, write, timeout)."""
    seconds: float
    p50_ms: float | None = None
    p99_ms: float | None = None

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


_SUMMARY = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h)\b")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_QUANTILE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.MULTILINE)
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse(output: str) -> WrkResult:
    """wrk's printed summary (with `--latency`) as a `WrkResult`; WrkFailed without one."""
    summary = _SUMMARY.search(output)
    if summary is None:
        raise WrkFailed(f"wrk printed no summary: {output.strip()[-400:]!r}")
    # wrk counts failed answers among its requests; a failure is never a completed one.
    errors = sum(int(n) for n in _NON_2XX.findall(output))
    socket = _SOCKET.search(output)
    if socket is not None:
        errors += sum(int(n) for n in socket.groups())
    quantiles = {
        q: float(value) * _SECONDS[unit] * 1000.0 for q, value, unit in _QUANTILE.findall(output)
    }
    requests = int(summary.group(1))
    return WrkResult(
        requests=max(0, requests - errors),
        errors=errors,
        seconds=float(summary.group(2)) * _SECONDS[summary.group(3)],
        p50_ms=quantiles.get("50"),
        p99_ms=quantiles.get("99"),
    )


async def run(
    url: str,
    *,
    connections: int,
    duration: float,
    lua: str,
    workdir: Path,
    request_timeout: float = 10.0,
) -> WrkResult:
    """wrk against `url` for `duration` seconds with `connections` keep-alive connections,
    one thread (a C client's one core suffices at these rates, and leaves the other to
    the server), each request as `lua` says (`script`)."""
    wrk = binary()
    if wrk is None:
        raise WrkMissing(MISSING)
    script_file = workdir / f"wrk-{abs(hash(lua)):x}.lua"
    script_file.write_text(lua)
    process = await asyncio.create_subprocess_exec(
        wrk, "--latency", "-t1", f"-c{connections}", f"-d{max(1, round(duration))}s",
        f"--timeout={request_timeout:g}s", "-s", str(script_file), url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode(errors="replace")
    if process.returncode != 0:
        raise WrkFailed(f"wrk exited {process.returncode}: {text.strip()[-400:]}")
    return parse(text)


@dataclass(frozen=True, slots=True)
class WrkPhase:
    """One measured wrk run of a benchmark: an operation (`get`, `create`, `chat`) on one
    side (etcd, plnt, the proxy, the runner …) at a number of connections, and the CPU
    each process group used meanwhile."""

    op: str
    side: str
    connections: int
    result: WrkResult
    cpu: dict[str, float]

    def cpu_ms(self, name: str) -> float | None:
        return cputime.per_request_ms(self.cpu, name, self.result.requests + self.result.errors)


async def measured(
    url: str,
    *,
    op: str,
    side: str,
    connections: int,
    duration: float,
    warmup: float,
    lua: str,
    warmup_lua: str | None = None,
    meter: cputime.Meter,
    workdir: Path,
) -> WrkPhase:
    """A warm-up of `warmup` seconds (none at 0; `warmup_lua`, else `lua`), then `duration`
    seconds of `lua` with `meter` read around it."""
    if warmup > 0:
        lua_first = lua if warmup_lua is None else warmup_lua
        await run(url, connections=connections, duration=warmup, lua=lua_first, workdir=workdir)
    before = meter.snapshot()
    result = await run(url, connections=connections, duration=duration, lua=lua, workdir=workdir)
    return WrkPhase(op, side, connections, result, meter.since(before))


def row(what: str, side: str, phase: WrkPhase, *, cpu_ms: float | None) -> str:
    """A wrk run's printed line: what was sent and to whom, rate, p50/p99, errors and the
    CPU per request of the side's own process (`cpu_ms`)."""
    r = phase.result
    return (
        f"  wrk {what} c={phase.connections:<3} {side:<18}{r.rate:9.0f}/s  "
        f"p50 {ms(r.p50_ms)} ms  p99 {ms(r.p99_ms)} ms  errors {r.errors}  "
        f"cpu/req {ms(cpu_ms)} ms"
    )


def ms(value: float | None) -> str:
    """Milliseconds as the wrk rows print them; `-` when unknown."""
    return "-" if value is None else f"{value:.3f}"
