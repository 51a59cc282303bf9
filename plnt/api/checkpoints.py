"""Progress inside a step on the wire: what a runner reports as a step goes, and takes back.

A durable invocation resumes on another replica without running again what had finished.
Whole steps travel as `completedSteps` (`plnt.api.invocations`); this module is the part
of a step that finished before the step did: the elements of a `forEach` that answered,
and a tool loop's turns and tool calls. The runner reports each as a `progress` line of
its stream (when the envelope asked for `stepOutputs`); the caller folds the lines into
one `StepProgress` per step (`fold`) and hands the lot back as the envelope's
`stepProgress`, which the runner seeds the step with.

A tool loop is kept per scope: `""` for a step without `forEach`, the element's index
(`"3"`) for each element of a map over a tool step. Its `LoopState` is a snapshot, sent
whole each time it changes (a loop is bounded by `maxTurns`): the conversation so far,
the finished turns' trace entries, and the turn under way once the model asked for calls
— which calls, the results that came back, and which calls of tools that are not
idempotent were sent. A resumed loop reuses the results, sends again the calls of
idempotent tools that had not answered, and fails the step when a non-idempotent call
was sent and never answered: it may have acted, and it is not sent twice.

No I/O here, and no pydantic: the runner and the saga's activity both read it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from plnt.api import traces

PROGRESS = "progress"
"""The `type` of a stream line reporting progress inside a step."""
STEP_PROGRESS = "stepProgress"
"""The envelope's field handing progress back, by step id."""
PLAIN_SCOPE = ""
"""The scope of the loop of a step without `forEach`."""


class PendingCall(TypedDict):
    """A call the model asked for in the turn under way."""

    id: str
    name: str
    arguments: str
    """As the model wrote them (JSON text)."""


class PendingTurn(TypedDict):
    """The turn under way: the model answered with calls, not all of them have answered."""

    calls: list[PendingCall]
    text: str
    """A completion step's action text (a chat step's reply is the conversation's last
    message already)."""
    results: dict[str, str]
    """Call id → the result text the model is shown."""
    sent: list[str]
    """Ids of calls of non-idempotent tools that were sent."""
    done: NotRequired[dict[str, traces.ToolCallEntry]]
    """Call id → the trace entry of a call that answered."""
    fallback: NotRequired[str]
    """The fallback backend that gave the reply, so the turn carried on keeps its mark."""


class LoopState(TypedDict):
    """A tool loop's progress: a snapshot, replaced whole."""

    turns: list[traces.TurnEntry]
    """The finished turns' trace entries."""
    messages: NotRequired[list[dict[str, Any]]]
    """A chat step's conversation, the turn under way's reply included."""
    transcript: NotRequired[str]
    """A completion step's text after its prompt, finished turns only."""
    pending: NotRequired[PendingTurn]


class StepProgress(TypedDict, total=False):
    """What a step had done when its invocation was lost."""

    items: dict[str, Any]
    """A `forEach` element's index (as text) → its result."""
    failedItems: list[traces.FailedItem]
    """A `continueOnError` map's elements that failed."""
    loops: dict[str, LoopState]
    """Scope → the tool loop's state."""


def item_line(step: str, index: int, output: Any) -> dict[str, Any]:
    """The line for one `forEach` element that answered."""
    return {"type": PROGRESS, "step": step, "item": index, "output": output}


def failed_item_line(step: str, failed: traces.FailedItem) -> dict[str, Any]:
    """The line for one element of a `continueOnError` map that failed."""
    return {"type": PROGRESS, "step": step, "failedItem": failed}


def loop_line(step: str, scope: str, state: LoopState) -> dict[str, Any]:
    """The line for a tool loop's new state."""
    return {"type": PROGRESS, "step": step, "scope": scope, "loop": state}


def fold(progress: dict[str, StepProgress], line: dict[str, Any]) -> str | None:
    """Fold one `progress` line into `progress` (step id → its progress); the step id, or
    None when the line is not one this module writes (a newer runner's, ignored)."""
    step = line.get("step")
    if not isinstance(step, str):
        return None
    if isinstance(line.get("item"), int) and "output" in line:
        progress.setdefault(step, {}).setdefault("items", {})[str(line["item"])] = line["output"]
        return step
    failed = line.get("failedItem")
    if isinstance(failed, dict) and isinstance(failed.get("index"), int):
        entry: traces.FailedItem = {"index": failed["index"], "error": str(failed.get("error"))}
        progress.setdefault(step, {}).setdefault("failedItems", []).append(entry)
        return step
    loop, scope = line.get("loop"), line.get("scope")
    if isinstance(loop, dict) and isinstance(scope, str):
        state: LoopState = loop  # type: ignore[assignment]
        progress.setdefault(step, {}).setdefault("loops", {})[scope] = state
        return step
    return None
