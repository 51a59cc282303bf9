"""The floor of the Invocation benchmark: a one-activity Temporal workflow and its worker.

    python -m plnt.bench.bareflows --address HOST:PORT --task-queue Q

`BareInvocation` runs one activity, `bare-call`, which answers at once: the least a
durable call can cost on Temporal (one workflow start, one activity, the result read).
The worker runs in a child process of its own, as plnt's worker runs inside `plnt up`,
so neither shares this benchmark's event loop with the load generator, and on the loop
plnt's worker runs on (`plnt.processes.signals.run_until_signalled`: uvloop unless
`PLNT_EVENT_LOOP` says otherwise). It prints `bareflows ready` once it polls, and stops on
SIGINT/SIGTERM or when its stdin closes.

The workflow itself is `plnt.bench.workflows.BareInvocation`, on the workflow side the
determinism contract covers; this module is its worker and activity.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from plnt.bench import local_serving
from plnt.bench.workflows import ACTIVITY, WORKFLOW, BareInvocation
from plnt.processes import signals, tasks

READY = "bareflows ready"
__all__ = ["ACTIVITY", "READY", "WORKFLOW", "call", "main"]


@activity.defn(name=ACTIVITY)
async def call(inputs: dict[str, str]) -> dict[str, str]:
    """The call that does nothing: its answer is its input."""
    return {"output": f"hello {inputs.get('topic', '')}"}


async def serve(address: str, task_queue: str, stop: asyncio.Event) -> None:
    # Run as `-m`, this module is `__main__`: the worker registers the importable one's
    # activity (the workflow is imported from its own module).
    from plnt.bench import bareflows

    client = await Client.connect(address)
    async with (
        tasks.running(local_serving.watch_stdin(stop), name="stdin"),
        Worker(
            client,
            task_queue=task_queue,
            workflows=[BareInvocation],
            activities=[bareflows.call],
            max_concurrent_activities=64,
        ),
    ):
        print(READY, flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m plnt.bench.bareflows")
    p.add_argument("--address", required=True)
    p.add_argument("--task-queue", required=True)
    args = p.parse_args(argv)
    signals.run_until_signalled(lambda stop: serve(args.address, args.task_queue, stop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
