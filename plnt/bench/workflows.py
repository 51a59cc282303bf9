"""The Invocation benchmark's floor, its workflow side: one activity, its result returned.

Deterministic and without I/O (it imports nothing but Temporal's workflow API), and held
to that by the import contract "workflow code imports nothing that does I/O", which names
this module as it names each saga's workflow package. The worker that runs it and the
activity it calls are in `plnt.bench.bareflows`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

WORKFLOW = "BareInvocation"
ACTIVITY = "bare-call"


@workflow.defn(name=WORKFLOW)
class BareInvocation:
    """One activity, its result returned."""

    @workflow.run
    async def run(self, inputs: dict[str, str]) -> dict[str, str]:
        result: dict[str, str] = await workflow.execute_activity(
            ACTIVITY, inputs, start_to_close_timeout=timedelta(seconds=30)
        )
        return result
