"""`RecordingDeploy`, an in-memory `DeployControl` standing in for the Temporal saga service.

The API-machinery tests run no Temporal: they serve the API with the stand-in
(`api_server.serving(..., deploy=RecordingDeploy())`), which records what the server asks
the saga (submits, aborts) and can play an unreachable Temporal (`unavailable`).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from plnt.sagas.control import DeployUnavailable

DEADLINE_SECONDS = 20.0


class RecordingDeploy:
    """A DeployControl kept in memory, standing in for Temporal: it records submits and aborts.

    `unavailable` makes every call fail as an unreachable Temporal would; `in_flight`
    is what `abort` answers.
    """

    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.aborted: list[dict[str, Any]] = []
        self.unavailable = False
        self.in_flight = True
        self._changed = asyncio.Condition()

    async def submit(self, obj: dict[str, Any]) -> None:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        async with self._changed:
            self.submitted.append(copy.deepcopy(obj))
            self._changed.notify_all()

    async def abort(self, obj: dict[str, Any]) -> bool:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        self.aborted.append(copy.deepcopy(obj))
        return self.in_flight

    def names(self) -> list[str]:
        return [o["metadata"]["name"] for o in self.submitted]

    async def wait_for_submits(self, count: int) -> None:
        """Wait (with a deadline) until at least `count` submits were recorded."""
        async with asyncio.timeout(DEADLINE_SECONDS), self._changed:
            await self._changed.wait_for(lambda: len(self.submitted) >= count)
