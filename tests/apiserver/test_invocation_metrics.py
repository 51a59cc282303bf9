"""Invocation metrics on /metrics: how many are in each phase, and how long finished ones took.

The status writes a worker would make are made here through the status subresource, so
the test reads exactly what the API server saw pass.
"""

from __future__ import annotations

from tests.support.api_server import BASE, Api, workflowrun
from tests.support.invocations import INVOCATIONS, invocation, set_status
from tests.support.waiting import eventually


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the exposition, or None when it is absent."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series in (f"{name}{{{wanted}}}", name if not labels else ""):
            return float(value)
    return None


async def test_invocations_are_counted_by_phase_and_finished_ones_timed(api: Api) -> None:
    await api.call("POST", BASE, body=workflowrun("summarize"))
    for name in ("a", "b"):
        assert (await api.call("POST", INVOCATIONS, body=invocation(name))).status == 201

    async def metrics() -> str:
        return (await api.call("GET", "/metrics")).text

    async def pending_two() -> bool:
        return sample(await metrics(), "plnt_invocations", phase="Pending") == 2

    await eventually(pending_two, what="two Pending invocations")
    await set_status(api, "a", {"phase": "Running", "startTime": "2026-07-01T10:00:00Z"})
    await set_status(api, "a", {"phase": "Succeeded", "completionTime": "2026-07-01T10:00:42Z"})

    async def finished() -> str | None:
        text = await metrics()
        return text if sample(text, "plnt_invocations", phase="Succeeded") == 1 else None

    text = await eventually(finished, what="one Succeeded invocation")
    assert sample(text, "plnt_invocations", phase="Pending") == 1
    assert sample(text, "plnt_invocations_finished_total", phase="Succeeded") == 1
    assert sample(text, "plnt_invocation_duration_seconds_count", phase="Succeeded") == 1
    assert sample(text, "plnt_invocation_duration_seconds_sum", phase="Succeeded") == 42
    assert (
        sample(text, "plnt_invocation_duration_seconds_bucket", le="30.0", phase="Succeeded") == 0
    )
    assert (
        sample(text, "plnt_invocation_duration_seconds_bucket", le="60.0", phase="Succeeded") == 1
    )
    # A status write that keeps the phase counts nothing again.
    await set_status(api, "a", {"message": "still done"})
    again = await metrics()
    assert sample(again, "plnt_invocations_finished_total", phase="Succeeded") == 1
    await api.call("DELETE", f"{INVOCATIONS}/a")

    async def forgotten() -> bool:
        return sample(await metrics(), "plnt_invocations", phase="Succeeded") == 0

    await eventually(forgotten, what="the deleted invocation forgotten")
