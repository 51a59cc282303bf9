"""The deploy activities, run one at a time in Temporal's `ActivityEnvironment`.

Real specs in a real OCI image layout, the real spec cache; no Temporal server. What
is checked is each activity's contract with the workflow: one typed input, one typed
output, and failures raised as the `Failure` the workflow reads back (with the attempt).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.testing import ActivityEnvironment

from plnt.client.clients import PlntClient
from plnt.client.kubeconfig import Connection
from plnt.sagas import activitynames, failures
from plnt.sagas import values as v
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.failures import Failure
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets.local import LocalTarget
from plnt.sagas.worker import placement_activities
from plnt.workflowspec import sources

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fanout.workflow.yaml"


@pytest.fixture
async def published(tmp_path: Path) -> tuple[str, str]:
    """The example spec in an OCI layout: (ref, digest)."""
    ref = f"oci-layout:{tmp_path / 'layout'}:fanout"
    pinned = await sources.publish(await asyncio.to_thread(EXAMPLE.read_bytes), ref)
    return ref, str(pinned.digest)


@pytest.fixture
async def activities(tmp_path: Path) -> AsyncIterator[DeployActivities]:
    # The API is never reached by the activities under test here (an unroutable address).
    api = PlntClient(Connection(server="https://127.0.0.1:9"))
    built = DeployActivities(
        api=api,
        target=LocalTarget(tmp_path / "runners"),
        specs=SpecCache(tmp_path / "specs"),
    )
    try:
        yield built
    finally:
        await built.close()


async def test_pull_verifies_the_digest_and_names_the_workflow(
    activities: DeployActivities, published: tuple[str, str]
) -> None:
    ref, digest = published
    result = await ActivityEnvironment().run(activities.pull, v.PullRequest(ref, digest))
    assert isinstance(result, v.PullResult)
    assert result.digest == digest
    assert result.size == len(EXAMPLE.read_bytes())
    assert result.workflow.startswith("fanout@")


async def test_the_positional_pull_of_older_sagas_gives_the_same_result(
    activities: DeployActivities, published: tuple[str, str]
) -> None:
    ref, digest = published
    environment = ActivityEnvironment()
    typed = await environment.run(activities.pull, v.PullRequest(ref, digest))
    positional = await environment.run(activities.pull_positional, ref, digest)
    assert positional == typed


async def test_a_wrong_digest_fails_for_good_as_digest_mismatch_with_its_attempt(
    activities: DeployActivities, published: tuple[str, str]
) -> None:
    ref, _ = published
    wrong = "sha256:" + hashlib.sha256(b"something else").hexdigest()
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, attempt=3)
    with pytest.raises(ApplicationError) as raised:
        await environment.run(activities.pull, v.PullRequest(ref, wrong))
    error = raised.value
    assert error.type == Failure.DIGEST_MISMATCH.value
    assert error.non_retryable
    assert error.details == (3,)
    assert Failure(error.type) in failures.SPEC_ERRORS


async def test_a_run_that_names_no_backend_resolves_to_echo_with_the_model_it_asks_for(
    activities: DeployActivities,
) -> None:
    request = v.ResolveRequest(namespace="default", model="tiny")
    resolve = placement_activities(activities).resolve
    resolved = await ActivityEnvironment().run(resolve, request)
    assert resolved.backend == v.Backend(type="echo", model="tiny")
    assert resolved.headroom is None


def test_a_failure_reads_back_as_the_member_that_raised_it() -> None:
    error = Failure.SMOKE_FAILED.error("expected 'x'", attempt=2)
    wrapped = ActivityError(
        "activity error",
        scheduled_event_id=1,
        started_event_id=2,
        identity="test",
        activity_type=activitynames.SMOKE,
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    wrapped.__cause__ = error
    read = failures.of(wrapped)
    assert read == failures.Failed(Failure.SMOKE_FAILED, "expected 'x'", 2)
    assert read.failure.reason(step_reason="SmokeFailed") == "SmokeFailed"
    assert Failure.UNREACHABLE.reason(step_reason="SmokeFailed") == "SmokeFailed"
    assert Failure.NO_BACKEND.reason(step_reason="PullFailed") == "BackendUnavailable"
