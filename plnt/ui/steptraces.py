"""What the pages show of a step trace (`plnt.api.traces`): each step, and inside a tool
loop each turn and tool call, inside a `forEach` its items and the ones that failed, and
for a skipped step why.

The Invocation page (`status.trace`) and the invoke form's answer (`trace`) show the same
rows from the same template (`step_trace.html`). No I/O, no HTML. The entries arrive as
JSON the runner wrote (`traces.StepEntry` and what it holds), kept by the API as open
objects, so every key is read defensively: a key a step does not have (a `model` step
without tools has no `turns`) is None, "" or empty here, decided once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from plnt.ui import views


def milliseconds(value: Any) -> str:
    """`12.3 ms`; "" for anything that is not a JSON number."""
    number = views.number(value)
    return "" if number is None else f"{number:.1f} ms"


def _objects(value: Any) -> Iterable[Mapping[str, Any]]:
    """The JSON objects of a list field (none when it is left out or not a list)."""
    return (item for item in value if isinstance(item, Mapping)) if isinstance(value, list) else ()


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """One tool call (`traces.ToolCallEntry`)."""

    id: str
    name: str
    arguments: str
    started: str
    duration: str
    outcome: str
    """`ok` (its tool answered), `invalid` (refused before running) or `error`."""
    error: str
    resumed: bool


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One model call of a tool loop (`traces.TurnEntry`) and the calls it asked for."""

    turn: int | None
    started: str
    duration: str
    model: str
    tokens: str
    final: bool
    resumed: bool
    calls: tuple[ToolCallRow, ...]


@dataclass(frozen=True, slots=True)
class FailedItemRow:
    """An element of a `continueOnError` map that failed (`traces.FailedItem`)."""

    index: int | None
    error: str


@dataclass(frozen=True, slots=True)
class StepRow:
    """One step of an invocation (`traces.StepEntry`)."""

    id: str
    kind: str
    cache: str
    duration: str
    backend: str
    attempts: str
    resumed: bool
    skipped: bool
    skipped_because: str
    """Why a skipped step did not run: its `when`, and the value it had."""
    turns: tuple[TurnRow, ...]
    tool_calls: int | None
    invalid_tool_calls: int | None
    items: int | None
    """How many elements a `forEach` step mapped over; None for a step without one."""
    failed_items: tuple[FailedItemRow, ...]
    error: str
    """A failed step's error message, on a stream's step line."""

    @property
    def agent(self) -> bool:
        """A tool loop: its turns are shown under it."""
        return bool(self.turns) or self.tool_calls is not None


def tool_call_row(entry: Mapping[str, Any]) -> ToolCallRow:
    invalid = entry.get("invalid") is True
    if invalid:
        outcome = "invalid"
    elif entry.get("ok") is True:
        outcome = "ok"
    else:
        outcome = "error"
    error = entry.get("error")
    return ToolCallRow(
        id=str(entry.get("id") or ""),
        name=str(entry.get("name") or ""),
        arguments=str(entry.get("arguments") or ""),
        started=milliseconds(entry.get("startedMs")),
        duration=milliseconds(entry.get("durationMs")),
        outcome=outcome,
        error="" if error is None else str(error),
        resumed=entry.get("resumed") is True,
    )


def tokens_text(usage: Any) -> str:
    """`120 + 30 = 150 tokens` from a model call's OpenAI usage; "" without one."""
    usage = views.mapping(usage)
    prompt = views.integer(usage.get("prompt_tokens"))
    completion = views.integer(usage.get("completion_tokens"))
    total = views.integer(usage.get("total_tokens"))
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    if prompt is None and completion is None:
        return "" if total is None else f"{total} tokens"
    return f"{prompt or 0} + {completion or 0} = {total or 0} tokens"


def turn_row(entry: Mapping[str, Any]) -> TurnRow:
    return TurnRow(
        turn=views.integer(entry.get("turn")),
        started=milliseconds(entry.get("startedMs")),
        duration=milliseconds(entry.get("durationMs")),
        model=milliseconds(entry.get("modelMs")),
        tokens=tokens_text(entry.get("usage")),
        final=entry.get("final") is True,
        resumed=entry.get("resumed") is True,
        calls=tuple(tool_call_row(call) for call in _objects(entry.get("toolCalls"))),
    )


def step_row(entry: Mapping[str, Any]) -> StepRow:
    attempts = views.integer(entry.get("attempts"))
    skipped = entry.get("skipped")
    error = views.mapping(entry.get("error"))
    return StepRow(
        id=str(entry.get("id") or ""),
        kind=str(entry.get("kind") or ""),
        cache=str(entry.get("cache") or ""),
        duration=milliseconds(entry.get("durationMs")),
        backend=milliseconds(entry.get("backendMs")),
        attempts="" if attempts is None else str(attempts),
        resumed=entry.get("resumed") is True,
        skipped=skipped is not None,
        skipped_because="" if skipped is None else str(skipped),
        turns=tuple(turn_row(turn) for turn in _objects(entry.get("turns"))),
        tool_calls=views.integer(entry.get("toolCalls")),
        invalid_tool_calls=views.integer(entry.get("invalidToolCalls")),
        items=views.integer(entry.get("items")),
        failed_items=tuple(
            FailedItemRow(index=views.integer(f.get("index")), error=str(f.get("error") or ""))
            for f in _objects(entry.get("failedItems"))
        ),
        error=str(error.get("message") or ""),
    )


def step_rows(trace: Any) -> tuple[StepRow, ...]:
    """A trace's steps in the order the runner listed them (entries that are not objects,
    which no runner writes, are left out)."""
    return tuple(step_row(entry) for entry in _objects(trace))
