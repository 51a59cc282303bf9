"""Background tasks that live as long as a block: started with a name, always stopped.

asyncio holds a task only weakly, a task nobody awaits hides how it ended, and a task
left running outlives what it works on. So each background loop plnt runs (a controller,
a follower, a supervisor, a heartbeat) is started by `running` and ends with its block:
on exit it is cancelled and awaited, so it has finished before the block's resources
close. `stop` does the same for tasks whose start and end are not one block.

Stopping waits for the task without awaiting it directly: `with suppress(CancelledError):
await task` would also swallow a cancellation of the *caller* that arrives meanwhile, and
the caller would carry on as if never cancelled. Here the caller's own cancellation
propagates (the task, already cancelled, still ends).

Errors: the task's cancellation is expected and not raised; any other exception the task
ended with is raised from `stop` (or the block's exit), as awaiting it would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.asynccontextmanager
async def running(
    coroutine: Coroutine[Any, Any, T], *, name: str
) -> AsyncIterator[asyncio.Task[T]]:
    """`coroutine` as a task named `name` while the block runs; stopped on exit."""
    task = asyncio.create_task(coroutine, name=name)
    try:
        yield task
    finally:
        await stop(task)


async def stop(*tasks: asyncio.Task[Any]) -> None:
    """Cancel every task, then wait until all have ended; raise what one ended with."""
    for task in tasks:
        task.cancel()
    if not tasks:
        return
    await asyncio.wait(tasks)
    ended = [task.exception() for task in tasks if not task.cancelled()]  # each one retrieved
    for error in ended:
        if error is not None:
            raise error
