"""A `forEach` step: the step run once per element of its list, `maxParallel` at once.

Each element has its own attempts, timeout and cache entry (the caller's `produce`, over
the step's context with `item` and `index` added); the step's output is the results in the
elements' order. A failed element fails the step — the others are cancelled — unless
`continueOnError`, which leaves None in its place and records the element in the trace's
`failedItems`. A resumed invocation's checkpoint hands back the elements an earlier attempt
finished or saw fail (`plnt.runner.checkpointing`): those are not run again, and each
element that ends here is reported to it. Which element a tool loop runs for travels in
`checkpointing.SCOPE`, set in the element's own task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from plnt.api import traces
from plnt.runner import checkpointing, errors, executions
from plnt.workflowspec import model, templating

MAX_ITEMS = 1024
"""The most elements a `forEach` maps over in one invocation."""

Produce = Callable[[dict[str, Any]], Awaitable[Any]]
"""One output of the step over a context (from the step cache, or by running it)."""


async def map_items(
    step: model.AnyStep,
    expression: templating.Expression,
    context: dict[str, Any],
    *,
    invocation: executions.Invocation,
    trace: executions.StepTrace,
    produce: Produce,
) -> list[Any]:
    """The step's results over the elements `expression` gives in `context`, in order."""
    try:
        items = expression.evaluate(context)
    except templating.RenderError as error:
        raise errors.StepFailed(step.id, f"`forEach` failed: {error}") from error
    if not isinstance(items, list | tuple):
        raise errors.StepFailed(
            step.id, f"`forEach` gave {type(items).__name__}, not a list: {step.for_each}"
        )
    if len(items) > MAX_ITEMS:
        raise errors.StepFailed(
            step.id, f"`forEach` gave {len(items)} elements, more than {MAX_ITEMS}"
        )
    trace.items = len(items)
    results: list[Any] = [None] * len(items)
    limit = asyncio.Semaphore(step.max_parallel)

    checkpoint = invocation.checkpoint
    trace.failed_items.extend(checkpoint.failed_items(step.id))
    failed_before = {entry["index"] for entry in trace.failed_items}

    async def one(index: int, item: Any) -> None:
        finished, results[index] = checkpoint.item(step.id, index)
        if finished or index in failed_before:
            return  # an earlier attempt of the invocation did it
        async with limit:
            checkpointing.SCOPE.set(str(index))  # this element's task only
            scoped = {**context, "item": item, "index": index}
            try:
                results[index] = await produce(scoped)
            except errors.StepFailed as error:
                if not step.continue_on_error:
                    error.args = (f"{error.args[0]} (forEach element {index})",)
                    raise
                failed: traces.FailedItem = {"index": index, "error": str(error)}
                trace.failed_items.append(failed)
                checkpoint.item_failed(step.id, failed)
                return
            checkpoint.item_done(step.id, index, results[index])

    try:
        async with asyncio.TaskGroup() as group:
            for index, item in enumerate(items):
                group.create_task(one(index, item))
    except ExceptionGroup as group:
        first = executions.first_failure(group)
        if first is None:
            raise
        raise first  # noqa: B904 - its own cause is chained already
    trace.failed_items.sort(key=lambda entry: entry["index"])
    return results
