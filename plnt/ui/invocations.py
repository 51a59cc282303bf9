"""What the pages show of Invocations (the kind, docs/invocations.md): the Run page's
list and the detail page, computed from the objects as the API answered them and the
current time. No I/O, no HTML; `views` holds the shared helpers (ages, durations),
`steptraces` the step trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from plnt.api import names
from plnt.ui import steptraces, views

PLURAL = names.INVOCATIONS

FINISHED_PHASES = names.INVOCATION_FINISHED_PHASES
"""From `plnt.api.names`, which imports no pydantic: `views` parses no models."""


@dataclass(frozen=True, slots=True)
class InvocationObjectRow:
    """One Invocation (the kind, docs/invocations.md) as the Run page lists it."""

    name: str
    revision: str
    phase: str
    duration: str
    tokens: str
    age: str
    reason: str
    running: bool


def invocation_duration(status: Mapping[str, Any], now: datetime) -> str:
    """`startTime` to `completionTime`, or to now while it runs: kubectl's DURATION."""
    start = views.parsed_time(status.get("startTime"))
    if start is None:
        return ""
    end = views.parsed_time(status.get("completionTime"))
    if end is None:
        end = None if status.get("phase") in FINISHED_PHASES else now
    if end is None:
        return ""
    return views.duration_text(max(0.0, (end - start).total_seconds()))


def invocation_object_row(obj: Mapping[str, Any], now: datetime) -> InvocationObjectRow:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    usage = status.get("usage") or {}
    tokens = usage.get("totalTokens")
    phase = str(status.get("phase") or "Pending")
    return InvocationObjectRow(
        name=str(meta.get("name") or ""),
        revision="" if status.get("revision") is None else str(status["revision"]),
        phase=phase,
        duration=invocation_duration(status, now),
        tokens="" if not isinstance(tokens, int) else str(tokens),
        age=views.age(meta.get("creationTimestamp"), now),
        reason=str((status.get("error") or {}).get("reason") or ""),
        running=phase not in FINISHED_PHASES,
    )


def invocation_object_rows(
    invocations: Iterable[Mapping[str, Any]], now: datetime
) -> list[InvocationObjectRow]:
    """The run's Invocations, newest first (by creation, then name)."""
    ordered = sorted(
        invocations,
        key=lambda obj: (
            str((obj.get("metadata") or {}).get("creationTimestamp") or ""),
            str((obj.get("metadata") or {}).get("name") or ""),
        ),
        reverse=True,
    )
    return [invocation_object_row(obj, now) for obj in ordered]


@dataclass(frozen=True, slots=True)
class InvocationView:
    """One Invocation as its detail page shows it."""

    row: InvocationObjectRow
    run: str
    requested_revision: str
    inputs: str
    output: str
    has_output: bool
    error_reason: str
    error_message: str
    error_step: str
    message: str
    endpoint: str
    attempts: str
    usage: str
    trace: tuple[steptraces.StepRow, ...]


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def invocation_view(obj: Mapping[str, Any], now: datetime) -> InvocationView:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    error = status.get("error") or {}
    usage = status.get("usage") or {}
    usage_text = ""
    if usage:
        usage_text = (
            f"{usage.get('promptTokens', 0)} prompt + {usage.get('completionTokens', 0)} "
            f"completion = {usage.get('totalTokens', 0)} tokens"
        )
        if usage.get("source"):
            usage_text += f" ({usage['source']})"
    return InvocationView(
        row=invocation_object_row(obj, now),
        run=str(spec.get("workflowRun") or ""),
        requested_revision=str(spec.get("revision", "stable")),
        inputs=_json(spec.get("inputs") or {}),
        output=_json(status.get("output")) if "output" in status else "",
        has_output="output" in status and status.get("output") is not None,
        error_reason=str(error.get("reason") or ""),
        error_message=str(error.get("message") or ""),
        error_step=str(error.get("step") or ""),
        message=str(status.get("message") or ""),
        endpoint=str(status.get("endpoint") or ""),
        attempts="" if status.get("attempts") is None else str(status["attempts"]),
        usage=usage_text,
        trace=steptraces.step_rows(status.get("trace")),
    )
