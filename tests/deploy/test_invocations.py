"""Durable Invocations end to end: real kubectl, API server, Temporal, workers and runners.

An Invocation answers 201 at once and its workflow calls a runner of the pinned revision;
these tests then kill what a long call depends on at the moment it matters and check the
call still finishes exactly once: a runner replica (SIGKILL mid-step: the next replica
resumes), the worker (SIGKILL mid-call: another worker resumes after the heartbeat
timeout), the API server (restarted mid-call). Steps are `http` steps calling a local
target (`tests.support.steptarget`) that counts every call and holds a step until the
test releases it, so "a finished step was not run again" is a count, and "mid-call" is
an explicit hold, never a window of time.

`status.attempts` is checked against the calls the runner itself counted
(`plnt_runner_invocations_total` and `plnt_runner_in_flight` on its `/metrics`): the
worker is killed at each moment of a call that matters — the call just received, a
step's end read or not yet read, the answer not yet read — the moments that are not
holds being made exact by stopping the worker (SIGSTOP) before the runner goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio import client as temporal_client
from temporalio.converter import DataConverter

from plnt.sagas.invoking import workflow as inv
from tests.support.blocking_api import Api
from tests.support.durable_invocations import (
    get_invocation,
    in_flight,
    invocation,
    only_endpoint,
    phase,
    received,
    runner_metrics,
    step_key,
    wait_invocation,
    worker_lost,
)
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, WorkerProcess, restart_server, runner_pids
from tests.support.statuses import condition_of
from tests.support.steptarget import StepTarget, durable_workflow, serving_step_target


@pytest.fixture(scope="module")
def target() -> Iterator[StepTarget]:
    with serving_step_target() as served:
        yield served


def deployed(
    stack: Stack, kubectl: Kubectl, namespace: str, target: StepTarget, **spec: Any
) -> str:
    """A run of the durable workflow, Ready; its name."""
    name = f"d{uuid.uuid4().hex[:6]}"
    ref, digest = stack.spec(name, text=durable_workflow(target.url))
    apply(kubectl, namespace, workflowrun(name, ref, digest, **spec))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{name}", "--timeout=90s")
    return name


def test_an_invocation_is_answered_at_once_and_completes_for_kubectl_wait(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    key = step_key()
    created = kubectl.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        "-o",
        "json",
        input=invocation("once", run, {"key": key}),
    )
    obj = json.loads(created.stdout)
    assert obj["status"]["phase"] == "Pending"
    owner = obj["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("WorkflowRun", run, True)
    kubectl.run(
        "wait", "-n", namespace, "--for=condition=Complete", "invocation/once", "--timeout=60s"
    )
    done = get_invocation(api, namespace, "once")
    status = done["status"]
    assert status["phase"] == "Succeeded"
    assert status["output"] == {"first": f"count {key}", "slow": f"hold {key}"}
    assert status["revision"] == 1 and status["attempts"] == 1
    assert [step["id"] for step in status["trace"]] == ["first", "slow"]
    assert status["observedGeneration"] == 1 and status["startTime"] and status["completionTime"]
    assert condition_of(done, "Complete") is not None
    assert target.arrivals(f"/count/{key}") == 1
    table = kubectl.run("get", "-n", namespace, "invocations").stdout
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "RUN", "REVISION", "PHASE", "DURATION", "TOKENS", "AGE"]
    assert row.split()[:4] == ["once", run, "1", "Succeeded"]
    reasons = [
        e["reason"]
        for e in api.call(
            lambda c: c.request("GET", f"/api/v1/namespaces/{namespace}/events")
        ).json()["items"]
        if e["involvedObject"]["name"] == "once"
    ]
    assert {"Started", "Succeeded"} <= set(reasons), reasons


def replica_pid(stack: Stack, run_uid: str, endpoint: str) -> int:
    """The pid of the runner replica serving at `endpoint` (from the local target's records)."""
    for path in stack.state_dir.glob(f"**/runs/*/*-{run_uid}/replicas/r*.json"):
        record = json.loads(path.read_text())
        if record["url"].rstrip("/") == endpoint.rstrip("/"):
            (pid,) = runner_pids(stack.state_dir, contains=f"plnt-replica={record['token']} ")
            return pid
    raise AssertionError(f"no replica record serves {endpoint}")


def steps_ran(endpoint: str, step: str) -> int:
    """How many times `step` ran on the replica at `endpoint` (its step histogram)."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        text = response.read().decode()
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("plnt_runner_step_seconds_count{") and f'step="{step}"' in line
        )
    )


def arrived(
    stack: Stack, api: Api, target: StepTarget, namespace: str, name: str, key: str, times: int
) -> None:
    """Wait until the held step of Invocation `name` has been called `times` times; a
    timeout says where the Invocation got to and what the worker logged last."""
    try:
        wait_for(
            lambda: target.arrivals(f"/hold/{key}") == times,
            timeout=60,
            message=f"call {times} of the held step",
        )
    except AssertionError as error:
        status = get_invocation(api, namespace, name).get("status")
        worker = "".join(stack.worker.output[-40:])
        raise AssertionError(
            f"{error} ({target.arrivals(f'/hold/{key}')} so far);"
            f" status: {json.dumps(status, indent=1)}\nworker:\n{worker}"
        ) from None


def running_at(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("endpoint"))


def test_a_runner_replica_killed_mid_call_is_resumed_on_another_without_rerunning_steps(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target, replicas=2)
    run_uid = api.get(namespace, run)["metadata"]["uid"]
    key = step_key()
    target.hold(key)
    apply(kubectl, namespace, invocation("survivor", run, {"key": key}))
    arrived(stack, api, target, namespace, "survivor", key, 1)
    first = wait_invocation(api, namespace, "survivor", running_at, what="running")
    lost = first["status"]["endpoint"]
    os.kill(replica_pid(stack, run_uid, lost), signal.SIGKILL)  # mid-step: `first` finished
    arrived(stack, api, target, namespace, "survivor", key, 2)  # resumed on the other replica
    target.release(key)
    done = wait_invocation(api, namespace, "survivor", phase("Succeeded"), what="Succeeded")
    status = done["status"]
    assert status["endpoint"] != lost and status["attempts"] == 2
    assert status["output"] == {"first": f"count {key}", "slow": f"hold {key}"}
    trace = {entry["id"]: entry for entry in status["trace"]}
    assert trace["first"].get("resumed") is True and "resumed" not in trace["slow"]
    # `first` ran once, on the lost replica: the survivor did not run it again.
    assert target.arrivals(f"/count/{key}") == 1
    assert steps_ran(status["endpoint"], "first") == 0
    reasons = [
        e["reason"]
        for e in api.events(namespace, run) + invocation_events(api, namespace, "survivor")
    ]
    assert "Retrying" in reasons, reasons


def invocation_events(api: Api, namespace: str, name: str) -> list[dict[str, Any]]:
    items = api.call(lambda c: c.request("GET", f"/api/v1/namespaces/{namespace}/events")).json()[
        "items"
    ]
    return [
        e
        for e in items
        if e["involvedObject"]["kind"] == "Invocation" and e["involvedObject"]["name"] == name
    ]


def answered(endpoint: str) -> int:
    """Calls of `/invoke` the replica at `endpoint` ran to their answer."""
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in runner_metrics(endpoint).splitlines()
            if line.startswith("plnt_runner_invocations_total{")
            and 'endpoint="invoke"' in line
            and 'outcome="ok"' in line
        )
    )


def carried(stack: Stack, api: Api, namespace: str, name: str) -> set[str]:
    """The steps whose outputs Temporal holds in the call's last heartbeat details: what
    an attempt after a lost worker hands back to the runner."""
    uid = get_invocation(api, namespace, name)["metadata"]["uid"]
    workflow = inv.workflow_id(namespace, name, uid)

    async def read() -> set[str]:
        client = await temporal_client.Client.connect(stack.temporal.address)
        described = await client.get_workflow_handle(workflow).describe()
        steps: set[str] = set()
        for pending in described.raw_description.pending_activities:
            payloads = list(pending.heartbeat_details.payloads)
            if payloads:
                (details,) = DataConverter.default.payload_converter.from_payloads(payloads)
                steps |= set((details or {}).get("completed") or {})
        return steps

    return asyncio.run(read())


def pause(worker: WorkerProcess) -> None:
    """SIGSTOP: the worker reads nothing more (what the runner sends waits in its socket)
    and sends nothing more, until `worker_lost` kills it."""
    assert worker.process is not None
    os.kill(worker.process.pid, signal.SIGSTOP)


def test_a_worker_killed_mid_call_is_finished_by_another_worker_without_rerunning_steps(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    endpoint = only_endpoint(api, namespace, run)
    before = received(endpoint)
    key = step_key()
    target.hold(key)
    apply(kubectl, namespace, invocation("orphan", run, {"key": key}))
    wait_for(lambda: target.arrivals(f"/hold/{key}") == 1, timeout=60, message="slow step")
    wait_invocation(api, namespace, "orphan", running_at, what="running")
    # A finished step is not run again once Temporal holds its output: the SDK sends a
    # heartbeat at most once a second, so the kill waits for that (a step's output lost
    # with its worker before it left is run again: docs/invocations.md).
    wait_for(
        lambda: "first" in carried(stack, api, namespace, "orphan"),
        timeout=30,
        message="the heartbeat carrying the finished step",
    )
    # The call runs on the module's only worker; it dies mid-call, as a crashed machine
    # would, and another worker takes the call over.
    with worker_lost(stack):
        pass
    wait_for(lambda: target.arrivals(f"/hold/{key}") == 2, timeout=60, message="resumed call")
    target.release(key)
    done = wait_invocation(api, namespace, "orphan", phase("Succeeded"), what="Succeeded")
    status = done["status"]
    assert status["attempts"] == 2
    assert received(endpoint) - before == 2
    assert status["output"] == {"first": f"count {key}", "slow": f"hold {key}"}
    assert {e["id"]: e for e in status["trace"]}["first"].get("resumed") is True
    assert target.arrivals(f"/count/{key}") == 1


def held_steps_workflow(url: str) -> str:
    """Two `http` steps in a row, each of which the test may hold: `/hold/KEY-a`, then
    `/hold/KEY-b`."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: held, version: 1.0.0}}
inputs: {{type: object, properties: {{key: {{type: string}}}}, required: [key]}}
steps:
  - id: a
    kind: http
    url: "{url}/hold/{{{{ inputs.key }}}}-a"
    retries: 0
    timeoutSeconds: 300
  - id: b
    kind: http
    needs: [a]
    url: "{url}/hold/{{{{ inputs.key }}}}-b"
    retries: 0
    timeoutSeconds: 300
output: '{{"a": steps.a.output, "b": steps.b.output}}'
"""


MOMENTS = ("received", "mid-stream", "step-ended", "answered")
"""When the worker is killed: the runner has just received the call (step `a` held, no
heartbeat since); step `a` ended and `b` is held, the kill coming as soon as `b` is called
(the worker recorded `a`'s end when it read it, before: `a` is not run again); step `a`
ended while the worker was stopped (it never read that end, so `a` runs again); the runner
answered while the worker was stopped (it never read the answer, so recorded no success)."""


@pytest.mark.parametrize("moment", MOMENTS)
def test_attempts_count_every_call_the_runner_received_whenever_the_worker_is_killed(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget, moment: str
) -> None:
    name = f"h{uuid.uuid4().hex[:6]}"
    ref, digest = stack.spec(name, text=held_steps_workflow(target.url))
    apply(kubectl, namespace, workflowrun(name, ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{name}", "--timeout=90s")
    endpoint = only_endpoint(api, namespace, name)
    before, answers = received(endpoint), answered(endpoint)
    key = step_key()
    a, b = f"/hold/{key}-a", f"/hold/{key}-b"
    target.hold(f"{key}-b")
    if moment in ("received", "step-ended"):
        target.hold(f"{key}-a")
    apply(kubectl, namespace, invocation("killed", name, {"key": key}))
    with worker_lost(stack) as lost:
        if moment == "received":
            wait_for(lambda: target.arrivals(a) == 1, timeout=60, message="step a called")
        elif moment == "mid-stream":
            wait_for(lambda: target.arrivals(b) == 1, timeout=60, message="step b called")
        elif moment == "step-ended":
            wait_for(lambda: target.arrivals(a) == 1, timeout=60, message="step a called")
            pause(lost)
            target.release(f"{key}-a")
            wait_for(lambda: target.arrivals(b) == 1, timeout=60, message="step b called")
        else:
            wait_for(lambda: target.arrivals(b) == 1, timeout=60, message="step b called")
            pause(lost)
            target.release(f"{key}-b")
            wait_for(lambda: answered(endpoint) == answers + 1, timeout=60, message="the answer")
    wait_for(lambda: received(endpoint) - before == 2, timeout=60, message="the call again")
    target.release(f"{key}-a")
    target.release(f"{key}-b")
    done = wait_invocation(api, namespace, "killed", phase("Succeeded"), what="Succeeded")
    status = done["status"]
    assert status["output"] == {"a": f"hold {key}-a", "b": f"hold {key}-b"}
    wait_for(
        lambda: in_flight(runner_metrics(endpoint)) == 0, timeout=30, message="no call running"
    )
    assert (status["attempts"], received(endpoint) - before) == (2, 2)
    if moment == "mid-stream":  # `a` ended just before the kill: its end was durable
        assert target.arrivals(a) == 1
    if moment == "step-ended":  # the worker never read `a`'s end: it ran again
        assert target.arrivals(a) == 2


def mapped_workflow(url: str) -> str:
    """A step counted once, a step skipped, then a map over three elements one at a time,
    each `/hold/KEY-ITEM`: the kill comes while the last one is held."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: mapped, version: 1.0.0}}
inputs: {{type: object, properties: {{key: {{type: string}}}}, required: [key]}}
steps:
  - id: first
    kind: http
    url: "{url}/count/{{{{ inputs.key }}}}"
  - id: never
    kind: transform
    when: "false"
    expression: "'ran'"
  - id: each
    kind: http
    needs: [first, never]
    forEach: "['x', 'y', 'z']"
    maxParallel: 1
    url: "{url}/hold/{{{{ inputs.key }}}}-{{{{ item }}}}"
    retries: 0
    timeoutSeconds: 300
output: '{{"skipped": steps.never.skipped, "each": steps.each.output}}'
"""


def test_a_worker_killed_mid_map_resumes_without_rerunning_elements_or_unskipping_steps(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    name = f"m{uuid.uuid4().hex[:6]}"
    ref, digest = stack.spec(name, text=mapped_workflow(target.url))
    apply(kubectl, namespace, workflowrun(name, ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{name}", "--timeout=90s")
    key = step_key()
    target.hold(f"{key}-z")
    apply(kubectl, namespace, invocation("mapped", name, {"key": key}))
    with worker_lost(stack):
        # `x` and `y` answered just before `z` was called: killed at once.
        wait_for(lambda: target.arrivals(f"/hold/{key}-z") == 1, timeout=60, message="z")
    wait_for(lambda: target.arrivals(f"/hold/{key}-z") == 2, timeout=60, message="z again")
    target.release(f"{key}-z")
    done = wait_invocation(api, namespace, "mapped", phase("Succeeded"), what="Succeeded")
    status = done["status"]
    assert status["output"] == {
        "skipped": True,
        "each": [f"hold {key}-x", f"hold {key}-y", f"hold {key}-z"],
    }
    assert status["attempts"] == 2
    assert target.arrivals(f"/count/{key}") == 1
    assert target.arrivals(f"/hold/{key}-x") == 1 and target.arrivals(f"/hold/{key}-y") == 1
    trace = {entry["id"]: entry for entry in status["trace"]}
    assert trace["never"].get("resumed") is True and trace["never"]["skipped"]


def test_an_api_server_restarted_mid_call_loses_nothing(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    key = step_key()
    target.hold(key)
    apply(kubectl, namespace, invocation("steady", run, {"key": key}))
    wait_for(lambda: target.arrivals(f"/hold/{key}") == 1, timeout=60, message="slow step")
    wait_invocation(api, namespace, "steady", running_at, what="running")
    restart_server(stack)
    target.release(key)
    done = wait_invocation(api, namespace, "steady", phase("Succeeded"), what="Succeeded")
    assert done["status"]["attempts"] == 1
    assert done["status"]["output"] == {"first": f"count {key}", "slow": f"hold {key}"}
    assert target.arrivals(f"/count/{key}") == 1 and target.arrivals(f"/hold/{key}") == 1


def runner_cancellations(endpoint: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in runner_metrics(endpoint).splitlines()
        if line.startswith("plnt_runner_invocations_total{") and 'outcome="cancelled"' in line
    )


def test_deleting_a_running_invocation_cancels_the_runners_call(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    key = step_key()
    target.hold(key)
    apply(kubectl, namespace, invocation("doomed", run, {"key": key}))
    wait_for(lambda: target.arrivals(f"/hold/{key}") == 1, timeout=60, message="slow step")
    endpoint = wait_invocation(api, namespace, "doomed", running_at)["status"]["endpoint"]
    before = runner_cancellations(endpoint)
    kubectl.run("delete", "-n", namespace, "invocation/doomed", "--wait=true")
    wait_for(
        lambda: runner_cancellations(endpoint) == before + 1,
        timeout=30,
        message="the runner's invocation cancelled",
    )
    target.release(key)
    assert target.arrivals(f"/hold/{key}") == 1  # not called again
    gone = kubectl.run("get", "-n", namespace, "invocation/doomed", check=False)
    assert "NotFound" in gone.stderr


def test_deleting_the_workflowrun_deletes_its_invocations(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    other = deployed(stack, kubectl, namespace, target)
    for name, of in (("mine-1", run), ("mine-2", run), ("theirs", other)):
        apply(kubectl, namespace, invocation(name, of, {"key": uuid.uuid4().hex[:8]}))
    for name in ("mine-1", "mine-2", "theirs"):
        wait_invocation(api, namespace, name, phase("Succeeded"), what=f"{name} Succeeded")
    kubectl.run("delete", "-n", namespace, f"wfr/{run}", "--wait=true", "--timeout=90s")
    left = kubectl.json("get", "-n", namespace, "invocations")["items"]
    assert [item["metadata"]["name"] for item in left] == ["theirs"]


def test_a_finished_invocation_is_deleted_after_its_ttl(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    apply(
        kubectl,
        namespace,
        invocation("brief", run, {"key": uuid.uuid4().hex[:8]}, ttlSecondsAfterFinished=0),
    )
    kubectl.run("wait", "-n", namespace, "--for=delete", "invocation/brief", "--timeout=60s")


def test_an_output_over_the_limit_fails_naming_its_size_and_the_limit(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    name = f"b{uuid.uuid4().hex[:6]}"
    ref, digest = stack.spec(name, text=BIG_WORKFLOW)
    apply(kubectl, namespace, workflowrun(name, ref, digest))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{name}", "--timeout=90s")
    apply(kubectl, namespace, invocation("huge", name, {"text": "x", "times": 300_000}))
    kubectl.run(
        "wait", "-n", namespace, "--for=condition=Failed", "invocation/huge", "--timeout=60s"
    )
    status = get_invocation(api, namespace, "huge")["status"]
    assert status["phase"] == "Failed" and "output" not in status
    assert status["error"]["reason"] == "OutputTooLarge"
    assert "the output is 300002 bytes" in status["error"]["message"]
    assert "262144 bytes (256 KiB)" in status["error"]["message"]


def test_a_revision_that_does_not_exist_fails_at_once(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    apply(kubectl, namespace, invocation("nowhere", run, {"key": "k"}, revision=7))
    done = wait_invocation(api, namespace, "nowhere", phase("Failed"), what="Failed")
    assert done["status"]["error"] == {
        "reason": "RevisionNotFound",
        "message": f"workflowrun {run} has no revision 7 (revisions: 1)",
    }
    assert condition_of(done, "Stalled") is not None


BIG_WORKFLOW = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: big, version: 1.0.0}
inputs: {type: object, properties: {text: {type: string}, times: {type: integer}}}
steps:
  - {id: grow, kind: transform, template: "{{ inputs.text * inputs.times }}"}
output: steps.grow.output
"""


def test_plnt_invoke_async_then_invocation_wait_prints_the_output(
    stack: Stack, kubectl: Kubectl, namespace: str, target: StepTarget
) -> None:
    run = deployed(stack, kubectl, namespace, target)
    key = step_key()
    plnt = [sys.executable, "-m", "plnt"]
    options = ["--kubeconfig", str(stack.server.kubeconfig), "-n", namespace]
    created = subprocess.run(
        [*plnt, "invoke", run, "--input", f"key={key}", "--async", *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    name = created.stdout.strip()
    assert name.startswith(f"{run}-")
    waited = subprocess.run(
        [*plnt, "invocation", "wait", name, "--timeout", "60", *options],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == {"first": f"count {key}", "slow": f"hold {key}"}
