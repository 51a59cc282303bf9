"""Invoking a workflow from the CLI: inputs from files and pairs, stream lines, `-v` details.

Inputs come from a JSON object (a file, `-` for stdin) and `key=value` pairs (a value
that parses as JSON is taken as JSON, otherwise as a string; pairs override the file).
A stream (`--stream`) is NDJSON: one `step` line as each step finishes, then one
`result` or `error` line; it has no Server-Timing, so the runner's own timings from
the result stand in for it. Apart from `streamed`, which prints step lines as they
come, everything here is a pure function of what the client returned.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from plnt.api.headers import REVISION_HEADER, CacheMode, CacheOutcome, StepCacheOutcome
from plnt.api.usage import Usage
from plnt.cli import exits
from plnt.client import InvokeResult, PlntClient, TimingHop


class InputError(exits.UsageError):
    """The inputs cannot be read or are not a JSON object and `key=value` pairs."""


_SHOWN_STEP_CACHE = frozenset(
    {StepCacheOutcome.HIT, StepCacheOutcome.MISS, StepCacheOutcome.BYPASS}
)
"""The step cache outcomes `-v` prints beside a step (`off` says nothing)."""


def read_inputs(filename: Path | None, pairs: list[str]) -> dict[str, Any]:
    """The inputs of `-f FILE` and `--input` pairs; raises `InputError` naming the culprit."""
    text = None
    try:
        if filename is not None:
            text = sys.stdin.read() if str(filename) == "-" else filename.read_text("utf-8")
        return parse_inputs(text, pairs)
    except OSError as error:
        raise InputError(f"{filename}: {error.strerror or error}") from error
    except ValueError as error:
        where = f"{filename}: " if filename is not None and "--input" not in str(error) else ""
        raise InputError(f"{where}{error}") from error


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
    """What `-v` shows: revision, cache result, the Server-Timing hops and, when the answer
    carries it, the usage with its source (reported by the backend, or counted by plnt)."""
    lines = [f"revision: {result.revision or '-'}", f"cache: {result.cache or '-'}"]
    for hop in result.timings:
        duration = f"{hop.duration_ms:.1f}ms" if hop.duration_ms is not None else "-"
        lines.append(
            f"timing: {hop.name} {duration}{'  ' + hop.description if hop.description else ''}"
        )
    usage = Usage.of_answer(result.body)
    if usage is not None:
        lines.append(
            f"usage: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion "
            f"tokens ({usage.source})"
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
    suffix = f"  cache {cache}" if cache in _SHOWN_STEP_CACHE else ""
    return f"✓ {step.get('id', '?')}  {took}{suffix}"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stream_result(result: dict[str, Any], headers: dict[str, str]) -> InvokeResult:
    """A stream's result line as an `InvokeResult` (timings from the body, not a header)."""
    timings = _mapping(result.get("timings"))
    hops = tuple(
        TimingHop(hop, float(timings[key]))
        for hop, key in (("runner", "runnerMs"), ("backend", "backendMs"), ("total", "totalMs"))
        if isinstance(timings.get(key), int | float)
    )
    body = {key: value for key, value in result.items() if key != "type"}
    lowered = {key.lower(): value for key, value in headers.items()}
    return InvokeResult(
        body=body,
        revision=lowered.get(REVISION_HEADER.lower()),
        cache=CacheOutcome.of_answer(result),
        timings=hops,
    )


async def streamed(
    client: PlntClient,
    name: str,
    inputs: dict[str, Any],
    *,
    request_timeout: float,
    cache: CacheMode = CacheMode.USE,
) -> InvokeResult | str:
    """Print step lines as they come; the result, or the message of the error line."""
    headers: dict[str, str] = {}
    async for line in client.invoke_stream(
        name, inputs, request_timeout=request_timeout, on_headers=headers.update, cache=cache
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
