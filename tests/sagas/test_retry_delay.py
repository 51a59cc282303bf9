"""How long the saga waits before trying a transiently failed generation again."""

from __future__ import annotations

from plnt.sagas import failures
from plnt.sagas.failures import Failure


def test_the_delay_starts_at_ten_seconds_doubles_and_stops_at_five_minutes() -> None:
    assert [failures.retry_delay(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert failures.retry_delay(10_000) == 300


def test_only_failures_time_can_fix_are_retried() -> None:
    assert {Failure.PULL_FAILED, Failure.NO_BACKEND, Failure.INSTALL_FAILED} <= failures.TRANSIENT
    assert failures.TRANSIENT.isdisjoint(failures.SPEC_ERRORS)
    assert not Failure.SMOKE_FAILED.transient and not Failure.ANALYSIS_FAILED.transient
