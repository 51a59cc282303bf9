"""Waiting on a condition with a deadline: the only way tests synchronise with the system.

`eventually` polls a predicate (plain or async) until it returns something truthy and
returns that value; past the deadline it fails the test naming what it waited for.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    within: float = 30.0,
    interval: float = 0.02,
    what: str = "a condition",
) -> T:
    """The first truthy value of `predicate()`, polled every `interval` seconds."""
    try:
        async with asyncio.timeout(within):
            while True:
                value = predicate()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value  # type: ignore[return-value]
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {within} s waiting for {what}") from None
