"""An activity keeps heartbeating while the work it waits on reports nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.testing import ActivityEnvironment

from plnt.sagas import heartbeats


async def test_heartbeats_repeat_the_last_details_while_the_work_is_silent() -> None:
    environment = ActivityEnvironment()
    seen: list[tuple[Any, ...]] = []
    enough = asyncio.Event()

    def observed(*details: Any) -> None:
        seen.append(details)
        if len(seen) >= 4:
            enough.set()

    environment.on_heartbeat = observed

    async def silent_work() -> None:
        async with heartbeats.steady(every=0.01) as beat:
            beat({"release": "r1", "waiting": []})
            # The work now reports nothing; only the ticker can make heartbeats arrive.
            await asyncio.wait_for(enough.wait(), timeout=30)

    await environment.run(silent_work)
    assert len(seen) >= 4
    assert all(details == ({"release": "r1", "waiting": []},) for details in seen)


async def test_the_ticker_task_is_gone_when_the_block_ends() -> None:
    environment = ActivityEnvironment()
    environment.on_heartbeat = lambda *details: None

    async def quick_work() -> list[str]:
        async with heartbeats.steady(every=0.01):
            assert "activity heartbeat" in {t.get_name() for t in asyncio.all_tasks()}
        return [t.get_name() for t in asyncio.all_tasks()]

    assert "activity heartbeat" not in await environment.run(quick_work)
