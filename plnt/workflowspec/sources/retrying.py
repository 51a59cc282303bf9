"""Bounded retries of transient failures, shared by the network sources.

Only `errors.Unavailable` is retried: a wrong password, a missing tag or a digest mismatch
will not change by asking again. The last failure is re-raised with the attempt count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from plnt.workflowspec import errors
from plnt.workflowspec.sources import settings

T = TypeVar("T")


async def call(operation: Callable[[], Awaitable[T]], *, limits: settings.Limits, what: str) -> T:
    """Run `operation`, retrying `errors.Unavailable` up to `limits.attempts` times in total."""
    attempts = max(1, limits.attempts)
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except errors.Unavailable as exc:
            if attempt == attempts:
                raise errors.Unavailable(
                    f"{what}: {exc} (gave up after {attempts} attempt"
                    f"{'s' if attempts != 1 else ''})",
                    attempts=attempts,
                    ref=exc.ref,
                ) from exc
            await asyncio.sleep(min(limits.backoff * 2 ** (attempt - 1), limits.max_backoff))
    raise AssertionError("unreachable")
