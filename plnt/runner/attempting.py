"""One step's attempts: each bounded by the step's `timeoutSeconds` and the invocation's
deadline, retried as the step's `retry` policy says.

This loop is the one layer that retries a backend call (the backend client, the API server
and the Invocation's activity do not), so the rules for retrying live together here:

* which failures: the policy's `retry` (or the older `retries`: backend failures and
  timeouts) names causes — `timeout`, `backend`, `output` (an answer that broke the step's
  `responseFormat`); any other failure passes through at once;
* how often and how far apart: the policy's attempts, with "equal jitter" exponential
  backoff capped at its `maxBackoffSeconds`, so callers that failed together do not all
  come back together;
* whether the backend can take it: a model step's retry is made only while its backend's
  retry budget has room (`may_retry`, `plnt.runner.retrybudget`); other steps, and a model's
  unusable output (a reply already paid for), are not counted;
* whether there is time: the invocation's deadline (`plnt.runner.deadlines`) bounds each
  attempt, an attempt it cuts short is `DeadlineExceeded` naming the step, never retried,
  and no retry is made that the time left could not cover;
* whether the caller has part of the answer: once a piece of the output step's reply went
  out, a failed attempt is not retried (a retry could not take the piece back).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from plnt.runner import backends, deadlines, errors, executions
from plnt.workflowspec import model

_DEADLINE_GRACE = 0.05
"""Seconds a step's own bound waits past the deadline, so an inner hop can name itself."""


async def attempts(
    step: model.AnyStep,
    call: Callable[[], Awaitable[Any]],
    *,
    invocation: executions.Invocation,
    trace: executions.StepTrace,
    streams: bool,
    may_retry: Callable[[], bool] | None,
) -> Any:
    """`call()`'s value from the first attempt that succeeds, or the step's failure.

    `streams` says the step is the output step (its pieces go to the caller as they come);
    `may_retry` is the backend's retry budget (None: no budget).
    """
    policy = step.retry_policy()
    delay = policy.backoff_seconds
    failure: errors.StepFailed | None = None
    deadline = deadlines.current().deadline
    for attempt in range(policy.attempts):
        if invocation.first_token_ms is not None and streams:
            break  # part of the answer is out already: a retry cannot take it back
        trace.attempts = max(trace.attempts, attempt + 1)
        bound = deadline.bound(step.timeout_seconds)
        # When the deadline binds, the guarded backend call ends at it and names the
        # backend; this bound, a moment later, catches what else the step waits on.
        try:
            async with asyncio.timeout(
                bound if bound >= step.timeout_seconds else bound + _DEADLINE_GRACE
            ):
                return await call()
        except TimeoutError as error:
            if bound < step.timeout_seconds and deadline.expired():
                raise errors.DeadlineExceeded(
                    f"step {step.id}", f"attempt {attempt + 1} outlived the time left"
                ) from error
            failure, cause = (
                errors.StepTimedOut(
                    step.id,
                    f"timed out after {step.timeout_seconds:g}s (attempt {attempt + 1})",
                ),
                "timeout",
            )
            failure.__cause__ = error
        except backends.BackendTimeout as error:
            failure, cause = errors.StepTimedOut(step.id, str(error)), "timeout"
            failure.__cause__ = error
        except backends.BackendError as error:
            failure, cause = errors.StepBackendFailed(step.id, str(error)), "backend"
            failure.__cause__ = error
        except errors.StepInvalidOutput as error:
            failure, cause = error, "output"
        if cause not in policy.retry_on:
            raise failure
        if attempt + 1 >= policy.attempts or invocation.first_token_ms is not None:
            continue
        pause = _jittered(min(delay, policy.max_backoff_seconds))
        left = deadline.remaining()
        if left is not None and left <= pause:
            raise failure  # no time for another attempt
        if not _retry_allowed(step, cause, may_retry):
            raise failure  # the backend's retry budget is spent: the error passes through
        await asyncio.sleep(pause)
        delay *= policy.backoff_factor
    assert failure is not None
    raise failure


def _retry_allowed(step: model.AnyStep, cause: str, may_retry: Callable[[], bool] | None) -> bool:
    """Whether a model step may call its backend again: only within the budget. Other
    steps (and a model's unusable output, a reply already paid for) are not counted."""
    if not isinstance(step, model.ModelStep) or cause == "output" or may_retry is None:
        return True
    return may_retry()


def _jittered(seconds: float) -> float:
    """A backoff with "equal jitter": half fixed, half random, so callers that failed
    together do not all come back together."""
    return seconds / 2 + random.uniform(0, seconds / 2)  # jitter, not a secret
