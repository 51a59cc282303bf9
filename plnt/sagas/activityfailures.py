"""How an activity fails: a `Failure` raised as the `ApplicationError` the workflow reads.

The deploy and quality-gate activities fail the same way: the error's `type` names the
cause (`failures.Failure`, the enum the workflow maps to a condition and a retry policy),
and the attempt travels in `details` so the timeline shows it. A spec that cannot be
pulled or parsed fails as the same typed cause wherever it is read (the pull step, the
smoke case, an evaluation dataset).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plnt.sagas.failures import Failure
from plnt.workflowspec import documents
from plnt.workflowspec import errors as spec_errors


def fail(failure: Failure, message: str, *, retryable: bool = False) -> ApplicationError:
    """`failure` as this attempt's error (non-retryable unless `retryable`)."""
    return failure.error(message, attempt=activity.info().attempt, retryable=retryable)


def spec_failure(error: Exception) -> ApplicationError:
    """A pull or parse failure as the typed error the workflow maps to a condition."""
    if isinstance(error, spec_errors.DigestMismatch):
        return fail(Failure.DIGEST_MISMATCH, str(error))
    if isinstance(error, spec_errors.SignatureError):
        return fail(Failure.SIGNATURE_REJECTED, str(error))
    if isinstance(error, spec_errors.InvalidReference | spec_errors.InvalidDigest):
        return fail(Failure.INVALID_REFERENCE, str(error))
    if isinstance(error, spec_errors.NotFound):
        return fail(Failure.SPEC_NOT_FOUND, str(error))
    if isinstance(error, documents.SpecError):
        return fail(Failure.INVALID_SPEC, f"invalid workflow spec: {error}")
    return fail(Failure.PULL_FAILED, str(error), retryable=True)
