"""Record the deploy saga's Temporal histories for the replay test.

Run after an intentional workflow change (a change of `plnt/sagas/deploying/workflow/` that
alters the commands it issues), then commit the new files:

    .venv/bin/python tests/deploy/record_histories.py              # every scenario
    .venv/bin/python tests/deploy/record_histories.py pause_promote  # only the ones named

It starts a real stack (Temporal dev server, `plnt up --no-worker`, a separate
`plnt worker`), runs each scenario below through the plnt HTTP API, and writes
each saga's history, `WorkflowHistory.to_json()`, to `tests/deploy/histories/NAME.json`.
`tests/deploy/test_replay.py` replays those files, and the older ones kept in
`histories/before-typed-inputs/`, against the current workflow code, and also runs the
same scenarios live and replays what they produced.

Scenarios (each a new WorkflowRun in its own namespace, deleted at the end so the
history runs to the workflow's completion):

* `deploy_scale_delete`: deploy, scale from 1 to 2 replicas, delete.
* `smoke_rollback`: deploy revision 1, then a new spec whose smoke expectation
  fails: the canary is removed and revision 1 keeps serving.
* `supersede`: a third spec is applied while the second's canary is held by a pause:
  the second deploy is cancelled and compensated, the third is promoted.
* `pause_promote`: a second spec pauses its canary at 50% for ten minutes; `promote`
  ends the pause and the second revision is promoted.
* `evaluate_shadow`: a second spec with a quality gate (an inline case) and shadow
  traffic to its weight-0 canary while a caller keeps invoking the run: the analyze step
  opens the shadow window, the evaluate step scores the case and the mirrored pairs, and
  the second revision is promoted.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from temporalio import client as temporal_client

from plnt.client import errors as client_errors
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.processes.temporal import TemporalDevServer
from plnt.sagas import values as v
from plnt.sagas.targets import local
from tests.support.plnt_server import PlntServer
from tests.support.stack import WorkerProcess, publish

HISTORIES = Path(__file__).resolve().parent / "histories"
BEFORE_TYPED_INPUTS = HISTORIES / "before-typed-inputs"
"""Histories recorded before pull and resolve took typed inputs (no `typed-activity-inputs`
marker): kept, so sagas that began then are proven to finish under today's code."""
SINCE_TYPED_INPUTS = frozenset({"evaluate_shadow"})
"""Scenarios added after then: they have no history in `before-typed-inputs/`."""
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fanout.workflow.yaml"
DEADLINE = 90.0


@dataclass(frozen=True)
class Specs:
    """Three published versions of the example workflow (distinct digests): (ref, digest)."""

    first: tuple[str, str]
    second: tuple[str, str]
    third: tuple[str, str]

    @classmethod
    def publish_into(cls, layout: Path) -> Specs:
        text = EXAMPLE.read_text()

        def one(version: str) -> tuple[str, str]:
            body = text.replace("version: 1.0.0", f"version: {version}")
            return publish(layout, f"replay-{version}", body)

        return cls(one("1.0.0"), one("1.0.1"), one("1.0.2"))


def manifest(name: str, spec: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": {"ref": spec[0], "digest": spec[1]}, **extra},
    }


async def wait_until(
    client: PlntClient,
    name: str,
    namespace: str,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    what: str,
) -> dict[str, Any]:
    """Poll the run until `predicate` holds, with a deadline."""
    deadline = time.monotonic() + DEADLINE
    obj: dict[str, Any] = {}
    while time.monotonic() < deadline:
        obj = await client.get_workflowrun(name, namespace=namespace)
        if predicate(obj):
            return obj
        await asyncio.sleep(0.1)  # poll interval; the deadline bounds the wait
    raise AssertionError(f"{namespace}/{name}: timed out waiting for {what}: {obj.get('status')}")


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return {}


def ready_at(generation: int) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == generation
            and status.get("phase") == "Ready"
            and condition(obj, "Ready").get("status") == "True"
            and condition(obj, "Progressing").get("status") == "False"
        )

    return check


async def delete_and_wait(client: PlntClient, name: str, namespace: str) -> None:
    path = client.object_path(WORKFLOWRUNS, name, namespace=namespace)
    await client.request("DELETE", path)
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            await client.request("GET", path)
        except client_errors.NotFound:
            return
        await asyncio.sleep(0.1)  # poll interval; the deadline bounds the wait
    raise AssertionError(f"{namespace}/{name} still exists after delete")


async def deploy_scale_delete(client: PlntClient, specs: Specs, namespace: str) -> tuple[str, str]:
    created = await client.create_workflowrun(manifest("hello", specs.first), namespace=namespace)
    await wait_until(client, "hello", namespace, ready_at(1), what="Ready")
    await client.scale_workflowrun("hello", 2, namespace=namespace)
    await wait_until(
        client,
        "hello",
        namespace,
        lambda o: ready_at(2)(o) and (o.get("status") or {}).get("readyReplicas") == 2,
        what="2 ready replicas",
    )
    await delete_and_wait(client, "hello", namespace)
    return "hello", str(created["metadata"]["uid"])


async def smoke_rollback(client: PlntClient, specs: Specs, namespace: str) -> tuple[str, str]:
    created = await client.create_workflowrun(manifest("canary", specs.first), namespace=namespace)
    await wait_until(client, "canary", namespace, ready_at(1), what="Ready")
    failing = {"smoke": {"input": {"topic": "etcd"}, "expect": {"contains": "absent-text"}}}
    await client.apply_workflowrun(
        manifest("canary", specs.second, canary=failing), namespace=namespace
    )

    def rolled_back(obj: dict[str, Any]) -> bool:
        degraded = condition(obj, "Degraded")
        return (
            (obj.get("status") or {}).get("observedGeneration") == 2
            and degraded.get("status") == "True"
            and degraded.get("reason") == "SmokeFailed"
            and condition(obj, "Progressing").get("status") == "False"
        )

    obj = await wait_until(client, "canary", namespace, rolled_back, what="SmokeFailed rollback")
    assert obj["status"]["revision"] == 1, obj["status"]
    await delete_and_wait(client, "canary", namespace)
    return "canary", str(created["metadata"]["uid"])


async def supersede(client: PlntClient, specs: Specs, namespace: str) -> tuple[str, str]:
    """The third spec lands while the second's canary is held by a pause: superseded."""
    created = await client.create_workflowrun(manifest("racer", specs.first), namespace=namespace)
    await wait_until(client, "racer", namespace, ready_at(1), what="Ready")
    held = {"pauseSeconds": 3600}
    await client.apply_workflowrun(
        manifest("racer", specs.second, canary=held), namespace=namespace
    )
    await wait_until(client, "racer", namespace, sharing_traffic, what="the canary sharing traffic")
    await client.apply_workflowrun(manifest("racer", specs.third), namespace=namespace)
    obj = await wait_until(client, "racer", namespace, ready_at(3), what="Ready at generation 3")
    assert obj["status"]["digest"] == specs.third[1], obj["status"]
    events = await client.events_for("racer", namespace=namespace)
    assert any(e.get("reason") == "Superseded" for e in events), events
    await delete_and_wait(client, "racer", namespace)
    return "racer", str(created["metadata"]["uid"])


def sharing_traffic(obj: dict[str, Any]) -> bool:
    """The canary takes part of the invocations beside the stable revision."""
    return len((obj.get("status") or {}).get("traffic") or []) == 2


async def pause_promote(client: PlntClient, specs: Specs, namespace: str) -> tuple[str, str]:
    created = await client.create_workflowrun(manifest("paused", specs.first), namespace=namespace)
    await wait_until(client, "paused", namespace, ready_at(1), what="Ready")
    pausing = {"weight": 50, "pauseSeconds": 600}
    await client.apply_workflowrun(
        manifest("paused", specs.second, canary=pausing), namespace=namespace
    )
    await wait_until(
        client, "paused", namespace, sharing_traffic, what="the canary sharing traffic"
    )
    await client.promote("paused", namespace=namespace)
    obj = await wait_until(client, "paused", namespace, ready_at(2), what="Ready at generation 2")
    assert obj["status"]["revision"] == 2, obj["status"]
    await delete_and_wait(client, "paused", namespace)
    return "paused", str(created["metadata"]["uid"])


async def evaluate_shadow(client: PlntClient, specs: Specs, namespace: str) -> tuple[str, str]:
    """The quality gate with shadow traffic: live calls mirrored to the canary, scored."""
    created = await client.create_workflowrun(manifest("gated", specs.first), namespace=namespace)
    await wait_until(client, "gated", namespace, ready_at(1), what="Ready")
    case = {"name": "etcd", "inputs": {"topic": "etcd"}, "expect": [{"contains": "etcd"}]}
    gated = {
        "weight": 0,
        "evaluation": {"cases": [case]},
        "shadow": {"percent": 100, "minComparisons": 2, "timeoutSeconds": 60},
    }
    stop = asyncio.Event()

    async def keep_calling() -> int:
        calls = 0
        while not stop.is_set():
            await client.invoke("gated", {"topic": f"live-{calls}"}, namespace=namespace)
            calls += 1
        return calls

    caller = asyncio.create_task(keep_calling())
    try:
        await client.apply_workflowrun(
            manifest("gated", specs.second, canary=gated), namespace=namespace
        )
        obj = await wait_until(client, "gated", namespace, ready_at(2), what="Ready at 2")
    finally:
        stop.set()
        calls = await caller
    record = obj["status"]["lastEvaluation"]
    assert record["passed"] and record["shadowComparisons"] >= 2, record
    assert calls >= 2, calls
    await delete_and_wait(client, "gated", namespace)
    return "gated", str(created["metadata"]["uid"])


# Each scenario answers the (name, uid) of the WorkflowRun whose saga it exercised.
Scenario = Callable[[PlntClient, Specs, str], Awaitable[tuple[str, str]]]
SCENARIOS: dict[str, Scenario] = {
    "deploy_scale_delete": deploy_scale_delete,
    "smoke_rollback": smoke_rollback,
    "supersede": supersede,
    "pause_promote": pause_promote,
    "evaluate_shadow": evaluate_shadow,
}


async def run_scenario(
    scenario: str, *, kubeconfig: Path, temporal_address: str, specs: Specs
) -> temporal_client.WorkflowHistory:
    """Run one scenario in a fresh namespace; the finished saga's history."""
    namespace = f"replay-{scenario.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    async with PlntClient.from_kubeconfig(kubeconfig) as client:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await client.request("POST", "/api/v1/namespaces", json=body)
        name, uid = await SCENARIOS[scenario](client, specs, namespace)
    temporal = await temporal_client.Client.connect(temporal_address)
    handle = temporal.get_workflow_handle(v.workflow_id(namespace, name, uid))
    await handle.result()  # the run was deleted: its saga has finished the teardown
    return await handle.fetch_history()


async def record(
    kubeconfig: Path, temporal_address: str, specs: Specs, scenarios: list[str]
) -> None:
    HISTORIES.mkdir(exist_ok=True)
    for scenario in scenarios:
        history = await run_scenario(
            scenario, kubeconfig=kubeconfig, temporal_address=temporal_address, specs=specs
        )
        target = HISTORIES / f"{scenario}.json"
        target.write_text(history.to_json() + "\n")
        print(f"{target}: {len(history.events)} events", flush=True)


def main() -> int:
    scenarios = sys.argv[1:] or list(SCENARIOS)
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        print(f"unknown scenarios {unknown}; known: {sorted(SCENARIOS)}", file=sys.stderr)
        return 2
    code = 1
    with tempfile.TemporaryDirectory(prefix="plnt-record-") as tmp:
        state = Path(tmp) / "state"
        temporal = TemporalDevServer(Path(tmp) / "temporal" / "t.db", ui_port=None)
        server: PlntServer | None = None
        worker: WorkerProcess | None = None
        try:
            asyncio.run(temporal.astart())
            server = PlntServer(
                state,
                sagas=True,
                extra_args=("--temporal-address", temporal.address, "--no-worker"),
            ).start()
            worker = WorkerProcess(temporal.address, server.kubeconfig, state).start()
            specs = Specs.publish_into(state / "layout")
            asyncio.run(record(server.kubeconfig, temporal.address, specs, scenarios))
            code = 0
        finally:
            if worker is not None:
                worker.stop()
            if server is not None:
                server.stop()
            local.stop_all(state / "runners")
            temporal.stop()
    # The Temporal SDK may crash during interpreter teardown (temporalio/sdk-python#300).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
