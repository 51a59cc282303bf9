"""`plnt invocation get|wait|logs NAME`: follow a durable Invocation (docs/invocations.md).

`plnt invoke NAME --async` creates one and prints its name; these read it back. Parsing
and printing only: the requests are `plnt.client.invocations`', the texts the pure
functions below.

* `get` prints the phase, revision, duration, tokens, attempts and, once failed, the
  reason (`-o json|yaml`: the object);
* `wait` follows it (a watch) until it finished and prints the output as `plnt invoke`
  does, on stdout; a failed or cancelled Invocation exits 1 with its reason, and
  `--timeout` running out exits 1 too;
* `logs` prints what it did: each step of the trace (resumed and skipped steps marked, a
  map's elements, a tool loop's turns and tool calls under its step), the status
  message and the Invocation's Events.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import typer

from plnt.api.headers import StepCacheOutcome
from plnt.cli import connecting, exits, printing
from plnt.cli.connecting import ContextOption, KubeconfigOption, NamespaceOption
from plnt.client import PlntClient, event_time
from plnt.client import invocations as client_invocations

Name = Annotated[str, typer.Argument(help="The Invocation's name.")]
group = typer.Typer(no_args_is_help=True, help="Follow durable Invocations.")


def register(app: typer.Typer) -> None:
    """Add `invocation get|wait|logs` to `app`."""
    app.add_typer(group, name="invocation")


def _status(obj: Mapping[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def summary(obj: Mapping[str, Any]) -> str:
    """`plnt invocation get`: one `key: value` line per known fact."""
    status = _status(obj)
    spec = obj.get("spec") or {}
    duration = printing.step_duration(status.get("startTime"), status.get("completionTime"))
    facts: list[tuple[str, Any]] = [
        ("name", (obj.get("metadata") or {}).get("name")),
        ("run", spec.get("workflowRun")),
        ("phase", status.get("phase") or "Pending"),
        ("revision", status.get("revision")),
        ("duration", duration or None),
        ("tokens", (status.get("usage") or {}).get("totalTokens")),
        ("attempts", status.get("attempts")),
        ("reason", (status.get("error") or {}).get("reason")),
        ("message", status.get("message")),
    ]
    return "\n".join(f"{key}: {value}" for key, value in facts if value not in (None, ""))


def output_text(obj: Mapping[str, Any]) -> str:
    """The output as `plnt invoke` prints it: a string as it is, anything else as JSON."""
    output = _status(obj).get("output")
    return output if isinstance(output, str) else json.dumps(output, indent=2)


def failure(obj: Mapping[str, Any]) -> str:
    """`invocation NAME failed: REASON: message` for a Failed or Cancelled Invocation."""
    status = _status(obj)
    error = status.get("error") or {}
    name = (obj.get("metadata") or {}).get("name")
    verb = "was cancelled" if status.get("phase") == "Cancelled" else "failed"
    text = f"invocation {name} {verb}: {error.get('reason') or status.get('phase')}"
    return f"{text}: {error['message']}" if error.get("message") else text


def turn_lines(turns: list[Any]) -> list[str]:
    """A tool loop's turns under its step: each model call, then the tool calls it asked."""
    lines = []
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        usage = turn.get("usage") or {}
        tokens = f"  {usage['total_tokens']} tokens" if "total_tokens" in usage else ""
        end = "  answered" if turn.get("final") else ""
        again = "  resumed" if turn.get("resumed") else ""
        lines.append(
            f"    turn {turn.get('turn', '?')}  model {turn.get('modelMs', 0):.1f} ms"
            f"{tokens}{end}{again}"
        )
        for call in turn.get("toolCalls") or []:
            if not isinstance(call, dict):
                continue
            outcome = "ok" if call.get("ok") else "invalid" if call.get("invalid") else "failed"
            why = f": {call['error']}" if call.get("error") else ""
            lines.append(
                f"      ↳ {call.get('name') or '?'}  {call.get('durationMs', 0):.1f} ms"
                f"  {outcome}{why}"
            )
    return lines


def trace_text(obj: Mapping[str, Any], events: list[dict[str, Any]]) -> str:
    """`plnt invocation logs`: the steps, the status message, the Events."""
    lines = []
    for step in _status(obj).get("trace") or []:
        if not isinstance(step, dict):
            continue
        if step.get("resumed"):
            lines.append(f"↻ {step.get('id', '?')}  resumed (finished by an earlier attempt)")
            continue
        took = step.get("durationMs")
        duration = f"{took:.1f} ms" if isinstance(took, int | float) else "-"
        cache = step.get("cache")
        suffix = (
            f"  cache {cache}" if cache in (StepCacheOutcome.HIT, StepCacheOutcome.MISS) else ""
        )
        if step.get("skipped"):
            lines.append(f"- {step.get('id', '?')}  skipped ({step['skipped']})")
            continue
        if isinstance(step.get("items"), int):
            failed = len(step.get("failedItems") or [])
            suffix += f"  {step['items']} items" + (f", {failed} failed" if failed else "")
        if isinstance(step.get("turns"), list):
            suffix += f"  {len(step['turns'])} turns, {step.get('toolCalls', 0)} tool calls"
        lines.append(
            f"✓ {step.get('id', '?')}  {duration}  attempt {step.get('attempts', 1)}{suffix}"
        )
        lines.extend(turn_lines(step.get("turns") or []))
    if message := _status(obj).get("message"):
        lines.append(f"status: {message}")
    for event in sorted(events, key=event_time):
        lines.append(
            f"{event_time(event)}  {event.get('type', '')}  {event.get('reason', '')}"
            f"  {event.get('message', '')}"
        )
    return "\n".join(lines)


@group.command("get", epilog="Example: plnt invocation get summarize-x7k2q")
def get(
    name: Name,
    output: Annotated[
        Literal["json", "yaml"] | None,
        typer.Option("--output", "-o", help="Print the object as json or yaml."),
    ] = None,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Show an Invocation's phase, revision, duration, tokens and reason."""

    async def action(client: PlntClient) -> dict[str, Any]:
        return await client_invocations.get(client, name)

    obj = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    typer.echo(printing.document(obj, output) if output else summary(obj))


@group.command("wait", epilog="Example: plnt invocation wait summarize-x7k2q --timeout 600")
def wait(
    name: Name,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait (0: no limit).")
    ] = 0.0,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Wait until the Invocation finished; print its output (exit 1 when it failed)."""

    async def follow(client: PlntClient) -> dict[str, Any]:
        last: dict[str, Any] = {}
        async for state in client_invocations.until_finished(client, name):
            last = state
        return last

    async def action(client: PlntClient) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(timeout or None):
                return await follow(client)
        except TimeoutError:
            return None

    obj = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    if obj is None:
        exits.fail(f"invocation {name} did not finish within {timeout:g} s", exits.Code.FAILED)
    if _status(obj).get("phase") != "Succeeded":
        exits.fail(failure(obj), exits.Code.FAILED)
    typer.echo(output_text(obj))


@group.command("logs", epilog="Example: plnt invocation logs summarize-x7k2q")
def logs(
    name: Name,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: NamespaceOption = None,
) -> None:
    """Show what the Invocation did: its steps, its status message and its Events."""

    async def action(client: PlntClient) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        obj = await client_invocations.get(client, name)
        path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/events"
        selector = f"involvedObject.kind=Invocation,involvedObject.name={name}"
        events = await client.list_all(path, params={"fieldSelector": selector})
        return obj, events

    obj, events = connecting.call(connecting.Target(kubeconfig, context, namespace), action)
    typer.echo(trace_text(obj, events))
