"""The runner's trace on the wire: one entry per step of an invocation, and in a tool-loop
step one per turn and per tool call.

The runner writes these (`/invoke` answers, stream step lines, chat completion extras); the
API server keeps them in the invocation log (`InvocationStatus.trace`), and the quality
gate reads an agent's trajectory from them (`plnt.api.evaluations.trajectory_of`). Times
are milliseconds from the start of the invocation; `usage` is OpenAI's object with
`source` (`plnt.api.usage`). Keys that only some steps have are absent on the others.

No I/O here, and no pydantic.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

ARGUMENTS_SHOWN = 200
"""How much of a tool call's arguments its trace entry keeps."""


def arguments_summary(raw: str) -> str:
    """A tool call's arguments for its trace entry: whitespace collapsed, at most
    `ARGUMENTS_SHOWN` characters (cut ones end with `…`)."""
    text = " ".join(raw.split())
    return text if len(text) <= ARGUMENTS_SHOWN else text[: ARGUMENTS_SHOWN - 1] + "…"


class ToolCallEntry(TypedDict):
    """One tool call of one turn."""

    id: str
    name: str
    startedMs: float
    durationMs: float
    ok: bool
    """It ran and its tool answered (a result went back to the model)."""
    arguments: NotRequired[str]
    """The arguments as the model wrote them, whitespace collapsed and cut to
    `ARGUMENTS_SHOWN` characters: enough to read the call in a trace, never a payload."""
    invalid: NotRequired[bool]
    """Refused before running: not JSON, an unknown tool, or arguments off the schema."""
    error: NotRequired[str]
    """Why it was refused or failed; the model was shown the same text."""
    resumed: NotRequired[bool]
    """Answered in an earlier attempt of a durable invocation: its result was reused."""


class TurnEntry(TypedDict):
    """One model call of a tool loop and the calls it asked for."""

    turn: int
    startedMs: float
    durationMs: float
    modelMs: float
    final: bool
    """The model answered instead of calling a tool: the loop ended here."""
    toolCalls: list[ToolCallEntry]
    usage: NotRequired[dict[str, Any]]
    resumed: NotRequired[bool]
    """Its model reply came from an earlier attempt of a durable invocation: not asked
    again. The turn finished there, or its calls were carried on here (`modelMs` is 0)."""
    fallback: NotRequired[str]
    """The fallback backend that answered the turn's model call (the primary refused it)."""


class FailedItem(TypedDict):
    """An element of a `continueOnError` map that failed."""

    index: int
    error: str


class StepEntry(TypedDict):
    """One step of an invocation."""

    id: str
    kind: str
    startedMs: float
    finishedMs: float
    durationMs: float
    backendMs: float
    attempts: int
    cache: str
    resumed: NotRequired[bool]
    skipped: NotRequired[str]
    """Why the step did not run: its `when` was false (the value, and the expression)."""
    turns: NotRequired[list[TurnEntry]]
    toolCalls: NotRequired[int]
    invalidToolCalls: NotRequired[int]
    items: NotRequired[int]
    """How many elements a `forEach` step mapped over."""
    failedItems: NotRequired[list[FailedItem]]
    steps: NotRequired[list[StepEntry]]
    """A workflow step's called workflow's steps, as its own trace."""
    error: NotRequired[dict[str, Any]]
    """On a stream's step line, a failed step's error (OpenAI's error object)."""
