"""The invoke envelope, written: the one body every caller of a runner's `/invoke` sends.

`plnt.api.invocations.InvokeRequest` reads it (on the runner and the API server); this
module writes it, for the CLI's client, the invocation saga's activity, the probes, the
load harness and the benchmarks. Before it each wrote the dict by hand, so a renamed
field could leave one writer behind; the field names now live here and in the model
beside each other in `plnt/api`. A plain function of plain values: no pydantic (the
client and the harness start without it) and no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INPUTS = "inputs"
COMPLETED_STEPS = "completedSteps"
STEP_OUTPUTS = "stepOutputs"
STEP_PROGRESS = "stepProgress"


def invoke_envelope(
    inputs: Any,
    *,
    completed_steps: Mapping[str, Any] | None = None,
    skipped_steps: Mapping[str, str] | None = None,
    step_progress: Mapping[str, Any] | None = None,
    step_outputs: bool = False,
) -> dict[str, Any]:
    """`{"inputs": inputs}`, with `stepOutputs: true` when a stream's step lines should carry
    each finished step's output, and `completedSteps` (step id → `{"output": …}`) from
    `completed_steps` (step id → output) when an earlier attempt finished some steps —
    with `skipped` for those of them `skipped_steps` names (step id → why its `when` was
    false), so they stay skipped — and `stepProgress` from `step_progress` (step id → what
    a step had done inside, `plnt.api.checkpoints`).

    Fields at their defaults are left out, so the plain envelope stays `{"inputs": …}`, the
    body older runners take. `inputs` is sent as given (the runner checks it against the
    workflow's schema): callers that hold a read-only mapping pass `dict(inputs)`.
    """
    body: dict[str, Any] = {INPUTS: inputs}
    if step_outputs:
        body[STEP_OUTPUTS] = True
    if completed_steps:
        skipped = skipped_steps or {}
        body[COMPLETED_STEPS] = {
            step: {"output": out, "skipped": skipped[step]} if step in skipped else {"output": out}
            for step, out in completed_steps.items()
        }
    if step_progress:
        body[STEP_PROGRESS] = dict(step_progress)
    return body
