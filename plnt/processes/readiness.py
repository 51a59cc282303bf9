"""Waiting for a child process's HTTP endpoint to answer 200, with a deadline.

The embedded Temporal server and the model server are both ready when one GET answers
200 (Temporal's namespace, the model server's model list); until then the endpoint may
refuse connections, hang or answer 503. What differs between them is only the URL and
the words of the error, so the loop is written once here: it probes with a short
per-request timeout and a capped exponential backoff, and stops early when the child
exits (waiting out the deadline on a dead child would hide its error for minutes).

Errors: whatever `exited` or `late` build: the caller's typed error, with its log's tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Callable

import aiohttp

FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 0.5
PROBE_TIMEOUT_SECONDS = 2.0


async def wait_until_answering(
    url: str,
    process: subprocess.Popen[bytes] | subprocess.Popen[str],
    *,
    within_seconds: float,
    exited: Callable[[int], BaseException],
    late: Callable[[], BaseException],
) -> None:
    """Return once GET `url` answers 200. Raise `exited(code)` as soon as `process` has
    exited, or `late()` when `within_seconds` pass first."""
    deadline = time.monotonic() + within_seconds
    delay = FIRST_DELAY_SECONDS
    probe_timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=probe_timeout) as session:
        while True:
            code = process.poll()
            if code is not None:
                raise exited(code)
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url) as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise late()
            await asyncio.sleep(delay)  # backoff between readiness probes
            delay = min(delay * 2, MAX_DELAY_SECONDS)
