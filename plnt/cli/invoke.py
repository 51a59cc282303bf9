"""`plnt invoke NAME`: run a deployed workflow once and print its output.

Inputs come from a JSON file (`-f`, `-` for stdin) and/or `--input key=value`
pairs (a value that parses as JSON is taken as JSON, otherwise as a string; pairs
override the file). `-v` adds, on stderr, the revision that answered, the cache
result and each Server-Timing hop.

`--stream` asks for the NDJSON stream of the invocation and prints, on stderr, one line
per step as it finishes (`✓ pros  100.8 ms  cache miss`, `✗ call  3.1 ms  <error>`), then
the output on stdout as without it, so `| jq` still sees only the output. A stream that
ends with an error line exits 1 with the runner's message; a stream has no Server-Timing,
so `-v` shows the runner's own timings from the result instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from plnt.cli import connecting
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import InvokeResult, PlntClient, TimingHop


def register(app: typer.Typer) -> None:
    """Add `invoke` to `app`."""
    app.command(
        "invoke",
        epilog=(
            "Examples: plnt invoke summarize -f input.json -v; "
            "plnt invoke chat --input question='What is etcd?'"
        ),
    )(invoke)


def parse_inputs(file_text: str | None, pairs: list[str]) -> dict[str, Any]:
    """Inputs from a JSON object text and `key=value` pairs (pairs win)."""
    inputs: dict[str, Any] = {}
    if file_text is not None:
        try:
            loaded = json.loads(file_text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from error
        if not isinstance(loaded, dict):
            raise ValueError("the input must be a JSON object")
        inputs.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--input {pair!r} is not key=value")
        try:
            inputs[key] = json.loads(value)
        except json.JSONDecodeError:
            inputs[key] = value
    return inputs


def details_text(result: InvokeResult) -> str:
    """What `-v` shows: revision, cache result and the Server-Timing hops."""
    lines = [f"revision: {result.revision or '-'}", f"cache: {result.cache or '-'}"]
    for hop in result.timings:
        duration = f"{hop.duration_ms:.1f}ms" if hop.duration_ms is not None else "-"
        lines.append(
            f"timing: {hop.name} {duration}{'  ' + hop.description if hop.description else ''}"
        )
    return "\n".join(lines)


def step_text(step: dict[str, Any]) -> str:
    """One finished step of a stream, as `--stream` prints it."""
    duration = step.get("durationMs")
    took = f"{duration:.1f} ms" if isinstance(duration, int | float) else "-"
    error = step.get("error")
    if isinstance(error, dict):
        return f"✗ {step.get('id', '?')}  {took}  {error.get('message', 'failed')}"
    cache = step.get("cache")
    suffix = f"  cache {cache}" if cache in ("hit", "miss") else ""
    return f"✓ {step.get('id', '?')}  {took}{suffix}"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stream_result(result: dict[str, Any], headers: dict[str, str]) -> InvokeResult:
    """A stream's result line as an `InvokeResult` (timings from the body, not a header)."""
    cache = _mapping(result.get("cache"))
    hits, misses = cache.get("hits") or 0, cache.get("misses") or 0
    outcome = {(False, False): "off", (True, False): "hit", (False, True): "miss"}.get(
        (bool(hits), bool(misses)), "partial"
    )
    timings = _mapping(result.get("timings"))
    hops = tuple(
        TimingHop(hop, float(timings[key]))
        for hop, key in (("runner", "runnerMs"), ("backend", "backendMs"), ("total", "totalMs"))
        if isinstance(timings.get(key), int | float)
    )
    body = {key: value for key, value in result.items() if key != "type"}
    lowered = {key.lower(): value for key, value in headers.items()}
    return InvokeResult(
        body=body, revision=lowered.get("x-plnt-revision"), cache=outcome, timings=hops
    )


async def _streamed(
    client: PlntClient, name: str, inputs: dict[str, Any], *, request_timeout: float
) -> InvokeResult | str:
    """Print step lines as they come; the result, or the message of the error line."""
    headers: dict[str, str] = {}
    async for line in client.invoke_stream(
        name, inputs, request_timeout=request_timeout, on_headers=headers.update
    ):
        kind = line.get("type")
        if kind == "step":
            typer.echo(step_text(_mapping(line.get("step"))), err=True)
        elif kind == "result":
            return stream_result(line, headers)
        elif kind == "error":
            error = _mapping(line.get("error"))
            return str(error.get("message") or f"the invocation failed ({line.get('status')})")
    return "the stream ended without a result"


def invoke(
    name: Annotated[str, typer.Argument(help="The WorkflowRun to invoke.")],
    filename: Annotated[
        Path | None,
        typer.Option("--filename", "-f", help="JSON object of inputs ('-' for stdin)."),
    ] = None,
    input_pairs: Annotated[
        list[str] | None,
        typer.Option("--input", help="An input as key=value (JSON values allowed); repeatable."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show revision, cache and timing on stderr.")
    ] = False,
    stream: Annotated[
        bool, typer.Option("--stream", help="Show each step as it finishes (on stderr).")
    ] = False,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Seconds to wait for the answer.")
    ] = 300.0,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Invoke the workflow once on its promoted revision and print the output."""
    try:
        text = None
        if filename is not None:
            text = sys.stdin.read() if str(filename) == "-" else filename.read_text("utf-8")
        inputs = parse_inputs(text, input_pairs or [])
    except OSError as error:
        connecting.fail(f"{filename}: {error.strerror or error}", connecting.EXIT_USAGE)
    except ValueError as error:
        where = f"{filename}: " if filename is not None and "--input" not in str(error) else ""
        connecting.fail(f"{where}{error}", connecting.EXIT_USAGE)

    async def action(client: PlntClient) -> InvokeResult | str:
        if stream:
            return await _streamed(client, name, inputs, request_timeout=request_timeout)
        return await client.invoke(name, inputs, request_timeout=request_timeout)

    result = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    if isinstance(result, str):
        connecting.fail(result, connecting.EXIT_OTHER)
    if verbose:
        typer.echo(details_text(result), err=True)
    output = result.output
    typer.echo(output if isinstance(output, str) else json.dumps(output, indent=2))
