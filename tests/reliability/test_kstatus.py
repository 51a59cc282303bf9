"""kstatus reads a WorkflowRun right in every phase: from its write to Ready or Stalled.

kstatus (`sigs.k8s.io/cli-utils/pkg/kstatus/status`) is how Helm's `--wait`, Flux and kpt
decide that an object is done. `compute` (`tests/support/kstatus.py`) is an oracle written
from its generic rules, in their order; the first test checks the oracle itself.

The phases come from the real code: the registry strategy for the write, and the real
`WorkflowRunController` on Temporal's time-skipping test server with scripted
activities for the saga's reports (each report's status laid over the stored object).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from plnt.api.backends import PlntBackend
from plnt.api.workflowruns import WorkflowRun
from plnt.registry.plntbackends.strategy import PlntBackendStrategy
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy
from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.deploying.workflow.controller import WorkflowRunController
from plnt.sagas.failures import Failure
from tests.support.kstatus import Result, body, compute, ready_at
from tests.support.scripted_saga import TEST_SERVER, Saga, ScriptedActivities, spec

# --- the oracle ------------------------------------------------------------------------


def test_the_oracle_follows_kstatus_order_of_rules() -> None:
    def obj(generation: int, observed: int | None, *conditions: tuple[str, str]) -> dict[str, Any]:
        status: dict[str, Any] = {
            "conditions": [{"type": t, "status": s, "reason": t + s} for t, s in conditions]
        }
        if observed is not None:
            status["observedGeneration"] = observed
        return {"kind": "WorkflowRun", "metadata": {"generation": generation}, "status": status}

    assert compute({"kind": "WorkflowRun", "metadata": {}}).status == "Current"
    assert compute(obj(2, 1, ("Ready", "True"))).reason == "LatestGenerationNotObserved"
    assert compute(obj(2, None, ("Ready", "True"))).status == "Current"  # nothing observed
    assert compute(obj(1, 1, ("Stalled", "True"), ("Reconciling", "True"))).status == "Failed"
    assert compute(obj(1, 1, ("Reconciling", "True"), ("Stalled", "True"))).status == ("InProgress")
    assert compute(obj(1, 1, ("Ready", "True"), ("Stalled", "False"))).status == "Current"
    assert compute(obj(1, 1, ("Ready", "False"))).status == "InProgress"
    assert compute(obj(1, 1, ("Ready", "Unknown"))).status == "InProgress"
    deleting = obj(1, 1, ("Stalled", "True"))
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert compute(deleting).status == "Terminating"


# --- the write: the registry strategy --------------------------------------------------


SAGAS = WorkflowRunStrategy(model=WorkflowRun, teardown_finalizer=True)


def test_a_new_run_is_in_progress_in_the_write_that_creates_it() -> None:
    obj = body()
    obj["status"] = {"phase": "Ready", "observedGeneration": 1}  # a client's status: dropped
    SAGAS.prepare_for_create(obj)

    assert SAGAS.validate(obj) == []
    result = compute(obj)
    assert (result.status, result.reason) == ("InProgress", "Accepted")
    (reconciling,) = obj["status"]["conditions"]
    assert reconciling["observedGeneration"] == 1
    assert "observedGeneration" not in obj["status"]


def test_a_spec_change_is_in_progress_in_its_write_and_forgets_an_older_stall() -> None:
    old = ready_at(body("a"), 1)
    old["status"]["conditions"].append(
        {"type": "Stalled", "status": "True", "reason": "SmokeFailed", "message": "gen 1"}
    )
    new = body("b")
    SAGAS.prepare_for_update(new, old)

    assert new["metadata"]["generation"] == 2
    assert SAGAS.validate(new) == []
    assert compute(new).status == "InProgress"
    types = {c["type"]: c for c in new["status"]["conditions"]}
    assert "Stalled" not in types
    assert (types["Reconciling"]["reason"], types["Reconciling"]["observedGeneration"]) == (
        "SpecChanged",
        2,
    )
    assert types["Ready"]["status"] == "True"  # what serves has not changed yet
    new["status"]["observedGeneration"] = 2  # even once observed, Reconciling holds it
    assert compute(new).status == "InProgress"


def test_a_write_that_keeps_the_generation_keeps_the_status() -> None:
    old = ready_at(body(), 1)
    new = body()
    new["metadata"]["labels"] = {"team": "a"}
    SAGAS.prepare_for_update(new, old)

    assert new["metadata"]["generation"] == 1
    assert new["status"] == old["status"]
    assert compute(new).status == "Current"


def test_a_server_without_sagas_claims_nothing_about_progress() -> None:
    plain = WorkflowRunStrategy(model=WorkflowRun)
    obj = body()
    plain.prepare_for_create(obj)
    assert "status" not in obj


def test_a_plntbackend_is_current_whatever_its_probes_say() -> None:
    strategy = PlntBackendStrategy(model=PlntBackend)
    backend: dict[str, Any] = {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": "echo", "namespace": "default"},
        "spec": {"type": "echo"},
    }
    strategy.prepare_for_create(backend)
    assert compute(backend).status == "Current"
    backend["status"] = {
        "reachable": False,
        "conditions": [{"type": "Probed", "status": "False", "reason": "Stale"}],
    }
    assert strategy.validate(backend) == []
    assert compute(backend).status == "Current"  # registered configuration, not a rollout


# --- the saga's reports ----------------------------------------------------------------

ON_THE_TEST_SERVER = pytest.mark.asyncio(loop_scope="module")


class Activities(ScriptedActivities):
    """The scripted activities plus a pull that may refuse the digest and a `scale`."""

    def __init__(self) -> None:
        super().__init__()
        self.bad_digest = False
        self.scale_failures = 0
        self.scales: list[int] = []

    def all(self) -> list[Any]:
        scripted = [a for a in super().all() if a != self.pull]  # pull_or_refuse stands in
        return [*scripted, self.pull_or_refuse, self.scale]

    @activity.defn(name=activitynames.PULL_SPEC)
    async def pull_or_refuse(self, request: v.PullRequest) -> v.PullResult:
        if self.bad_digest:
            raise Failure.DIGEST_MISMATCH.error(
                "the spec's digest is not the pinned one", attempt=1
            )
        return v.PullResult(request.digest, 100, "scripted@1.0.0", False)

    @activity.defn(name=activitynames.SCALE)
    async def scale(self, request: v.InstallRequest) -> v.Installed:
        self.scales.append(request.replicas)
        self._note()
        if self.scale_failures > 0:
            self.scale_failures -= 1
            raise Failure.SCALE_FAILED.error("runner did not start", attempt=5)
        url = f"http://127.0.0.1:1/r{request.revision}"
        return v.Installed([url] * request.replicas, request.replicas)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


@pytest_asyncio.fixture(loop_scope="module")
async def saga(env: WorkflowEnvironment) -> AsyncIterator[Saga]:
    activities = Activities()
    built = Saga(env.client, activities)
    async with Worker(
        env.client,
        task_queue=built.task_queue,
        workflows=[WorkflowRunController],
        activities=activities.all(),
    ):
        yield built
        activities.release.set()


def stored(generation: int, report: v.Report) -> dict[str, Any]:
    """The run as the API serves it after `report`, when `generation` is the newest."""
    return {"kind": "WorkflowRun", "metadata": {"generation": generation}, "status": report.status}


def readings(saga: Saga, generation: int, since: int = 0) -> list[Result]:
    return [compute(stored(generation, r)) for r in saga.activities.reports[since:]]


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status["conditions"] if c["type"] == kind), None)


@ON_THE_TEST_SERVER
async def test_a_deploy_is_in_progress_at_every_report_until_its_promotion(saga: Saga) -> None:
    await saga.desire(spec("a"))
    status = await saga.settled(revision=1)

    seen = readings(saga, 1)
    assert [r.status for r in seen[:-1]] == ["InProgress"] * (len(seen) - 1)
    assert {r.reason for r in seen[:-1]} == {"Deploying"}
    assert seen[-1].status == "Current"
    assert condition(status, "Reconciling") is None and condition(status, "Stalled") is None
    assert status["observedGeneration"] == 1


@ON_THE_TEST_SERVER
async def test_a_deploy_no_retry_can_fix_is_failed_with_the_reason(saga: Saga) -> None:
    assert isinstance(saga.activities, Activities)
    saga.activities.bad_digest = True
    await saga.desire(spec("a"))
    status = await saga.settled()

    final = compute(stored(1, saga.activities.reports[-1]))
    assert (final.status, final.reason) == ("Failed", "DigestMismatch")
    assert "digest" in final.message
    assert condition(status, "Reconciling") is None
    assert status["phase"] == "Failed"
    assert [r.status for r in readings(saga, 1)[:-1]] == ["InProgress"] * (
        len(saga.activities.reports) - 1
    )


@ON_THE_TEST_SERVER
async def test_a_failure_waiting_for_its_retry_stays_in_progress_until_the_retry_deploys(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    saga.activities.install_failures = 1
    await saga.desire(spec("a"))
    failed = await saga.settled()

    reading = compute(stored(1, saga.activities.reports[-1]))
    assert (reading.status, reading.reason) == ("InProgress", "InstallFailed")
    assert "retrying in 10 s" in reading.message
    assert condition(saga.activities.last_status(), "Stalled") is None
    mark = len(saga.activities.reports)
    assert failed["phase"] == "Failed"

    await env.sleep(10)
    await saga.settled(revision=2)

    after = readings(saga, 1, since=mark)
    assert [r.status for r in after] == ["InProgress"] * (len(after) - 1) + ["Current"]


@ON_THE_TEST_SERVER
async def test_a_superseded_deploy_is_in_progress_until_the_newer_generation_serves(
    saga: Saga,
) -> None:
    saga.activities.hold_installs.set()
    await saga.desire(spec("a"))
    await saga.activities.until(saga.activities.holding.is_set, "install held")
    saga.activities.hold_installs.clear()
    mark = len(saga.activities.reports)

    await saga.desire(spec("b"))
    await saga.settled(revision=2)

    after = readings(saga, 2, since=mark)
    assert [r.status for r in after] == ["InProgress"] * (len(after) - 1) + ["Current"]
    superseded = [r for r in saga.activities.reports[mark:] if r.status["observedGeneration"] == 1]
    assert superseded, "the superseded deploy reported its compensation"
    last_of_1 = superseded[-1].status
    reconciling = condition(last_of_1, "Reconciling")
    assert reconciling is not None and reconciling["reason"] == "Superseded"


@ON_THE_TEST_SERVER
async def test_an_aborted_deploy_is_failed_until_a_new_generation(saga: Saga) -> None:
    saga.activities.hold_installs.set()
    await saga.desire(spec("a"))
    await saga.activities.until(saga.activities.holding.is_set, "install held")

    assert await saga.update("abort") is True
    await saga.settled()

    final = compute(stored(1, saga.activities.reports[-1]))
    assert (final.status, final.reason) == ("Failed", "Aborted")


@ON_THE_TEST_SERVER
async def test_a_replicas_change_is_current_once_scaled_and_in_progress_while_a_scale_waits(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    assert isinstance(saga.activities, Activities)
    await saga.desire(spec("a"))
    await saga.settled(revision=1)
    saga.activities.scale_failures = 1

    await saga.desire(spec("a", replicas=3))  # same revision, more replicas: a scale
    await saga.activities.until(lambda: saga.activities.scales == [3], "the scale tried")
    await saga.settled()
    reading = compute(stored(2, saga.activities.reports[-1]))
    assert (reading.status, reading.reason) == ("InProgress", "ScaleFailed")

    await env.sleep(10)
    await saga.activities.until(
        lambda: saga.activities.last_status().get("readyReplicas") == 3, "scaled on the retry"
    )
    status = saga.activities.last_status()
    assert saga.activities.scales == [3, 3]
    assert compute(stored(2, saga.activities.reports[-1])).status == "Current"
    assert condition(status, "Stalled") is None and condition(status, "Reconciling") is None
