"""A blocking facade over `PlntClient` for synchronous tests: one loop, one client.

The deploy-style tests drive real processes from plain (sync) test functions; this facade
runs each client call to completion on its own `asyncio.Runner`, and waits on a run's
status with a deadline (`wait`, `wait_settled`), naming the last status it saw on failure.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from plnt.client.clients import InvokeResult, PlntClient
from tests.support.plnt_server import wait_for
from tests.support.statuses import settled

T = TypeVar("T")


class Api:
    """A blocking facade over `PlntClient` for synchronous tests: one loop, one client."""

    def __init__(self, kubeconfig: Path) -> None:
        self._runner = asyncio.Runner()
        self.client = PlntClient.from_kubeconfig(kubeconfig)

    def call(self, operation: Callable[[PlntClient], Awaitable[T]]) -> T:
        return self._runner.run(_await(operation(self.client)))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self.call(lambda c: c.get_workflowrun(name, namespace=namespace))

    def wait(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60.0,
        message: str = "condition",
    ) -> dict[str, Any]:
        """Poll the run until `predicate(obj)`; the object (AssertionError naming the last one)."""
        last: list[dict[str, Any]] = []

        def check() -> dict[str, Any] | None:
            obj = self.get(namespace, name)
            last[:] = [obj]
            return obj if predicate(obj) else None

        try:
            found: dict[str, Any] = wait_for(check, timeout=timeout, message=message)
        except AssertionError as error:
            status = last[0].get("status") if last else None
            raise AssertionError(f"{error}; last status: {json.dumps(status, indent=1)}") from None
        return found

    def wait_settled(self, namespace: str, name: str, *, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait(namespace, name, settled, timeout=timeout, message=f"{name} settled")

    def invoke(self, namespace: str, name: str, inputs: dict[str, Any]) -> InvokeResult:
        return self.call(lambda c: c.invoke(name, inputs, namespace=namespace))

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.call(lambda c: c.events_for(name, namespace=namespace))

    def close(self) -> None:
        try:
            self._runner.run(self.client.close())
        finally:
            self._runner.close()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable
