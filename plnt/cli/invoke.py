"""`plnt invoke NAME`: run a deployed workflow once and print its output.

Inputs come from a JSON file (`-f`, `-` for stdin) and/or `--input key=value`
pairs (a value that parses as JSON is taken as JSON, otherwise as a string; pairs
override the file). `-v` adds, on stderr, the revision that answered, the cache
result and each Server-Timing hop.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from plnt.cli import connecting
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import InvokeResult, PlntClient


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
    stream: Annotated[bool, typer.Option("--stream", help="Stream the output.")] = False,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Seconds to wait for the answer.")
    ] = 300.0,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Invoke the workflow once on its promoted revision and print the output."""
    if stream:
        connecting.fail("streaming invoke is not yet available", connecting.EXIT_USAGE)
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

    async def action(client: PlntClient) -> InvokeResult:
        return await client.invoke(name, inputs, request_timeout=request_timeout)

    result = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    if verbose:
        typer.echo(details_text(result), err=True)
    output = result.output
    typer.echo(output if isinstance(output, str) else json.dumps(output, indent=2))
