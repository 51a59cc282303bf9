"""Why a deploy step failed: one enum that activities raise and the workflow reads.

An activity raises `Failure.X.error(message, attempt=...)`, a Temporal
`ApplicationError` whose `type` is the member's value; the workflow reads it back with
`of(error)`. The value is part of the history format (it travels in the failure), so
members are added, never renamed. Each member knows the condition reason a human acts
on (`reason`, else the failing step's) and whether time may fix it (`transient`: the
saga tries the same generation again after `retry_delay`); `retry` builds an
activity's retry policy. Workflow code: no I/O here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

RETRY_FIRST_SECONDS = 10
RETRY_MAX_SECONDS = 300


class Failure(enum.StrEnum):
    """The failure types of the deploy saga's activities."""

    DIGEST_MISMATCH = "DigestMismatch"
    SIGNATURE_REJECTED = "SignatureRejected"
    """The spec or dataset is unsigned, tampered with, or not by the signer required."""
    INVALID_SPEC = "InvalidSpec"
    INVALID_REFERENCE = "InvalidReference"
    SPEC_NOT_FOUND = "SpecNotFound"
    PULL_FAILED = "PullFailed"
    NO_BACKEND = "NoBackend"
    BACKEND_UNAVAILABLE = "BackendUnavailable"
    INSTALL_FAILED = "InstallFailed"
    CREDENTIALS_MISSING = "CredentialsMissing"
    UNREACHABLE = "Unreachable"
    SMOKE_FAILED = "SmokeFailed"
    ANALYSIS_FAILED = "AnalysisFailed"
    SLO_MISSED = "SLOMissed"
    """The canary missed an objective of spec.slo in the analysis (its measured value, the
    objective and the stable's are in the message)."""
    EVALUATION_FAILED = "EvaluationFailed"
    """The quality gate: a scorer's pass rate (or a judge's win rate) broke its limit."""
    INVALID_DATASET = "InvalidDataset"
    """The evaluation's dataset is not a list of valid cases."""
    JUDGE_FAILED = "JudgeFailed"
    """A judge scorer's model could not be asked (retried, then the deploy fails)."""
    PROMOTE_FAILED = "PromoteFailed"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    """No node pool has room for the canary; nothing was installed (retried later)."""
    TARGET_UNAVAILABLE = "TargetUnavailable"
    """The worker has no such target (`spec.target: kubernetes` without a cluster)."""
    SCALE_FAILED = "ScaleFailed"
    ROUTE_UNAVAILABLE = "RouteUnavailable"
    """The run asks for an HTTPRoute the worker cannot make (no `--routes`, no Gateway)."""
    ROUTE_FAILED = "RouteFailed"
    """kube-apiserver refused or did not take a move of the run's HTTPRoute (retried later)."""
    CONFLICT = "Conflict"
    ERROR = "Error"
    """Anything without a type of its own (a crash, a timeout): treated as transient."""

    def reason(self, *, step_reason: str) -> str:
        """The condition reason a human acts on.

        Failures that name their cause keep it (a few share one); the rest (a crash, an
        unreachable canary, a registry that is down) take the failing step's reason.
        """
        if self in _OWN_REASON:
            return _REASON_OF.get(self, self.value)
        return step_reason

    @property
    def transient(self) -> bool:
        """Whether the saga tries the same generation again later (time may fix it)."""
        return self in TRANSIENT

    def error(self, message: str, *, attempt: int, retryable: bool = False) -> ApplicationError:
        """The exception an activity raises; `attempt` travels so the timeline shows it."""
        return ApplicationError(message, attempt, type=self.value, non_retryable=not retryable)


_OWN_REASON = frozenset(
    {
        Failure.DIGEST_MISMATCH,
        Failure.SIGNATURE_REJECTED,
        Failure.INVALID_SPEC,
        Failure.INVALID_REFERENCE,
        Failure.SPEC_NOT_FOUND,
        Failure.BACKEND_UNAVAILABLE,
        Failure.NO_BACKEND,
        Failure.INSTALL_FAILED,
        Failure.CREDENTIALS_MISSING,
        Failure.SMOKE_FAILED,
        Failure.ANALYSIS_FAILED,
        Failure.SLO_MISSED,
        Failure.EVALUATION_FAILED,
        Failure.INVALID_DATASET,
        Failure.JUDGE_FAILED,
        Failure.TARGET_UNAVAILABLE,
        Failure.INSUFFICIENT_CAPACITY,
        Failure.ROUTE_UNAVAILABLE,
        Failure.ROUTE_FAILED,
    }
)
_REASON_OF = {
    Failure.INVALID_REFERENCE: Failure.INVALID_SPEC.value,
    Failure.NO_BACKEND: Failure.BACKEND_UNAVAILABLE.value,
}

SPEC_ERRORS = frozenset(
    {
        Failure.DIGEST_MISMATCH,
        Failure.SIGNATURE_REJECTED,
        Failure.INVALID_SPEC,
        Failure.INVALID_REFERENCE,
        Failure.SPEC_NOT_FOUND,
        Failure.INVALID_DATASET,
    }
)
"""A spec that cannot be used: no retry helps, a new generation must fix it."""

TRANSIENT = frozenset(
    {
        Failure.PULL_FAILED,
        Failure.NO_BACKEND,
        Failure.INSTALL_FAILED,
        Failure.CREDENTIALS_MISSING,
        Failure.UNREACHABLE,
        Failure.CONFLICT,
        Failure.ERROR,
        Failure.SCALE_FAILED,
        Failure.INSUFFICIENT_CAPACITY,
        Failure.ROUTE_FAILED,
    }
)
"""A registry or backend that is down, a runner that did not start, a secret not yet written."""


@dataclass(frozen=True)
class Failed:
    """A failed activity as the workflow sees it: which failure, what it said, attempts made."""

    failure: Failure
    message: str
    attempts: int


class GateFailed(Exception):
    """A gate the workflow judged from an activity's answer (the quality gate): the step
    fails as if its activity had raised `failure`, and the rollout compensates alike."""

    def __init__(self, failure: Failure, message: str, attempts: int = 1) -> None:
        super().__init__(message)
        self.failed = Failed(failure, message, attempts)


def of(error: BaseException) -> Failed:
    """Read a failed activity's `Failure`; an untyped or unknown failure is `Failure.ERROR`."""
    if isinstance(error, GateFailed):
        return error.failed
    cause = error.__cause__ if isinstance(error, ActivityError) else None
    if isinstance(cause, ApplicationError):
        details = cause.details
        attempts = details[0] if details and isinstance(details[0], int) else 1
        try:
            failure = Failure(cause.type or Failure.ERROR.value)
        except ValueError:
            failure = Failure.ERROR
        return Failed(failure, cause.message, attempts)
    return Failed(Failure.ERROR, str(cause or error), 1)


def names(failures: frozenset[Failure]) -> list[str]:
    """The `non_retryable_error_types` of a retry policy, in a stable order."""
    return sorted(failure.value for failure in failures)


def retry_delay(retries: int) -> int:
    """Seconds before the saga tries a transiently failed generation again, for retry
    number `retries` (1, 2, …): 10 s doubling up to 5 minutes."""
    return min(RETRY_FIRST_SECONDS << min(max(retries - 1, 0), 16), RETRY_MAX_SECONDS)


def retry(attempts: int, *, non_retryable: frozenset[Failure] = frozenset()) -> RetryPolicy:
    """An activity's retry policy: `attempts` tries, 250 ms doubling to 5 s apart."""
    return RetryPolicy(
        initial_interval=timedelta(milliseconds=250),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=attempts,
        non_retryable_error_types=names(non_retryable),
    )
