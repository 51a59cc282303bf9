"""The load generator: open and closed loop against one or more endpoints at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import aiohttp

from plnt.harness.plan import Endpoint, LoadPlan, Progress
from plnt.harness.result import BenchResult


async def run(
    plan: LoadPlan,
    endpoints: Sequence[Endpoint],
    *,
    session: aiohttp.ClientSession | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> list[BenchResult]:
    """Run `plan` against every endpoint side by side in the same window; one result each."""
    raise NotImplementedError
