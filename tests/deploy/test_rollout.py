"""Rollouts end to end: a failed smoke rolls back, a newer spec supersedes, rollback, abort.

Real kubectl, a real API server, a real Temporal and worker, real runner processes.
A deploy held in flight is an explicit hold, never a window of wall-clock time: a
second revision whose canary pauses for an hour (`spec.canary.pauseSeconds`), which
only `promote`, `abort` or a newer generation ends. Pauses that run out, retry backoff
and interrupted activities are timed on Temporal's skipped clock in tests/sagas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plnt.client import errors as client_errors
from tests.support.blocking_api import Api
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack, runner_pids, runner_pids_by_revision
from tests.support.statuses import condition_of, settled, step_of

HOLD = 3600
"""Seconds a paused canary would hold: far longer than any test, so only an action ends it."""


def deploy(
    stack: Stack,
    kubectl: Kubectl,
    api: Api,
    namespace: str,
    name: str,
    tag: str,
    version: str,
    **spec: Any,
) -> tuple[str, dict[str, Any]]:
    """Publish the example as `tag` with `version`, apply it, wait until settled."""
    ref, digest = stack.spec(tag, version=version)
    apply(kubectl, namespace, workflowrun(name, ref, digest, **spec))
    return digest, api.wait_settled(namespace, name)


def step_running(name: str) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        step = step_of(obj, name)
        return step is not None and step["state"] == "Running"

    return check


def event_reasons(api: Api, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(e.get("type", ""), e.get("reason", "")) for e in api.events(namespace, name)]


def test_failed_smoke_rolls_back_and_the_previous_revision_keeps_serving(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    digest_a, obj = deploy(stack, kubectl, api, namespace, "smoky", "smoke-a", "1.0.0", replicas=2)
    assert obj["status"]["revision"] == 1
    ref_b, digest_b = stack.spec("smoke-b", version="2.0.0")
    assert digest_b != digest_a
    smoke = {"input": {"topic": "etcd"}, "expect": {"equals": "nope"}}
    apply(
        kubectl,
        namespace,
        workflowrun("smoky", ref_b, digest_b, replicas=2, canary={"smoke": smoke}),
    )

    def degraded(obj: dict[str, Any]) -> bool:
        found = condition_of(obj, "Degraded")
        return settled(obj) and found is not None and found["status"] == "True"

    obj = api.wait(namespace, "smoky", degraded, message="Degraded True")
    status = obj["status"]
    degraded_condition = condition_of(obj, "Degraded")
    assert degraded_condition is not None
    assert degraded_condition["reason"] == "SmokeFailed"
    assert "does not equal" in degraded_condition["message"]
    assert "nope" in degraded_condition["message"]
    ready = condition_of(obj, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "RolledBack")
    assert (status["revision"], status["digest"]) == (1, digest_a)
    assert [entry["revision"] for entry in status["history"]] == [1]
    smoke_step, rollback_step = step_of(obj, "smoke"), step_of(obj, "rollback")
    assert smoke_step is not None and smoke_step["state"] == "Failed"
    assert rollback_step is not None and rollback_step["state"] == "Compensated"

    uid = obj["metadata"]["uid"]
    by_revision = runner_pids_by_revision(stack.state_dir, uid=uid)
    assert set(by_revision) == {1} and len(by_revision[1]) == 2, by_revision
    assert runner_pids(stack.state_dir, contains=uid) == by_revision[1]

    answer = api.invoke(namespace, "smoky", {"topic": "etcd"})
    assert answer.revision == "1"
    assert answer.output["topic"] == "etcd"

    events = kubectl.run("get", "events", "-n", namespace).stdout
    assert any("Warning" in line and "SmokeFailed" in line for line in events.splitlines()), events


def test_a_newer_spec_supersedes_a_deploy_in_flight_and_its_canary_is_removed(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    digest_1, _ = deploy(stack, kubectl, api, namespace, "busy", "super-1", "3.0.0", replicas=2)
    ref_2, digest_2 = stack.spec("super-2", version="3.1.0")
    ref_3, digest_3 = stack.spec("super-3", version="3.2.0")  # published up front: less to do
    held = {"pauseSeconds": HOLD}
    apply(kubectl, namespace, workflowrun("busy", ref_2, digest_2, replicas=2, canary=held))
    api.wait(namespace, "busy", sharing_traffic, message="revision 2 holding beside 1")
    apply(kubectl, namespace, workflowrun("busy", ref_3, digest_3, replicas=2))

    def promoted_3(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("digest") == digest_3

    obj = api.wait(namespace, "busy", promoted_3, message="third digest promoted")
    status = obj["status"]
    assert status["phase"] == "Ready"
    assert status["revision"] == 3
    assert [entry["revision"] for entry in status["history"]] == [1, 3]
    assert digest_1 != digest_3
    assert "Superseded" in {reason for _, reason in event_reasons(api, namespace, "busy")}

    uid = obj["metadata"]["uid"]
    by_revision = runner_pids_by_revision(stack.state_dir, uid=uid)
    assert set(by_revision) == {3} and len(by_revision[3]) == 2, by_revision
    assert runner_pids(stack.state_dir, contains=uid) == by_revision[3]


def test_rollback_to_revision_one_deploys_its_digest_again_as_a_new_revision(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, tmp_path: Path
) -> None:
    digest_a, _ = deploy(stack, kubectl, api, namespace, "back", "roll-a", "5.0.0")
    ref_a = f"oci-layout:{stack.layout}:roll-a"
    digest_b, obj = deploy(stack, kubectl, api, namespace, "back", "roll-b", "5.1.0")
    assert obj["status"]["revision"] == 2
    digest_c, obj = deploy(stack, kubectl, api, namespace, "back", "roll-c", "5.2.0")
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (3, digest_c)
    assert len({digest_a, digest_b, digest_c}) == 3

    body = tmp_path / "rollback.json"
    body.write_text(json.dumps({"toRevision": 1}))
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/back/rollback"
    answer = json.loads(kubectl.run("create", "--raw", path, "-f", str(body)).stdout)
    assert answer["spec"]["workflow"] == {"ref": ref_a, "digest": digest_a}

    def promoted_4(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == 4

    obj = api.wait(namespace, "back", promoted_4, message="revision 4 promoted")
    status = obj["status"]
    assert status["digest"] == digest_a
    assert status["history"][-1]["reason"] == "rollback to revision 1"
    assert [entry["revision"] for entry in status["history"]] == [1, 2, 3, 4]
    assert obj["spec"]["workflow"] == {"ref": ref_a, "digest": digest_a}
    assert api.invoke(namespace, "back", {"topic": "etcd"}).revision == "4"
    by_revision = runner_pids_by_revision(stack.state_dir, uid=obj["metadata"]["uid"])
    assert set(by_revision) == {4}, by_revision


def sharing_traffic(obj: dict[str, Any]) -> bool:
    """The canary holds part of the live invocations beside the stable revision."""
    return len((obj.get("status") or {}).get("traffic") or []) == 2


def test_a_paused_canary_takes_its_weight_of_live_invocations_until_promote_ends_the_pause(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    _, obj = deploy(stack, kubectl, api, namespace, "paused", "pause-a", "5.0.0")
    assert obj["status"]["revision"] == 1
    ref_b, digest_b = stack.spec("pause-b", version="5.1.0")
    canary = {"weight": 50, "pauseSeconds": HOLD}
    apply(kubectl, namespace, workflowrun("paused", ref_b, digest_b, canary=canary))

    holding = api.wait(namespace, "paused", sharing_traffic, message="two traffic targets")
    assert [(t["revision"], t["weight"]) for t in holding["status"]["traffic"]] == [
        (1, 50),
        (2, 50),
    ]
    analyze = step_of(holding, "analyze")
    assert analyze is not None and analyze["state"] == "Running"
    assert analyze["message"] == f"canary takes 50% of invocations for {HOLD} s"
    served = {api.invoke(namespace, "paused", {"topic": "raft"}).revision for _ in range(40)}
    assert served == {"1", "2"}

    answer = api.call(lambda c: c.promote("paused", namespace=namespace))
    assert (answer["status"], answer["code"]) == ("Success", 200)

    obj = api.wait_settled(namespace, "paused")
    status = obj["status"]
    assert (status["phase"], status["revision"], status["digest"]) == ("Ready", 2, digest_b)
    assert [t["revision"] for t in status["traffic"]] == [2]
    analyze = step_of(obj, "analyze")
    assert analyze is not None and analyze["state"] == "Succeeded"
    assert analyze["message"].startswith("canary held 50% of invocations for ")
    assert analyze["message"].endswith(" s, then promoted on request")
    by_revision = runner_pids_by_revision(stack.state_dir, uid=obj["metadata"]["uid"])
    assert set(by_revision) == {2}, by_revision
    with pytest.raises(client_errors.Conflict):
        api.call(lambda c: c.promote("paused", namespace=namespace))


def test_abort_during_a_pause_moves_the_traffic_back_and_a_second_abort_is_a_conflict(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    digest_a, _ = deploy(stack, kubectl, api, namespace, "held", "held-a", "6.0.0")
    ref_b, digest_b = stack.spec("held-b", version="6.1.0")
    canary = {"weight": 20, "pauseSeconds": HOLD}
    apply(kubectl, namespace, workflowrun("held", ref_b, digest_b, canary=canary))
    api.wait(namespace, "held", sharing_traffic, message="two traffic targets")

    answer = api.call(lambda c: c.abort("held", namespace=namespace))
    assert (answer["status"], answer["code"]) == ("Success", 200)

    obj = api.wait_settled(namespace, "held")
    progressing = condition_of(obj, "Progressing")
    assert progressing is not None and progressing["reason"] == "Aborted"
    status = obj["status"]
    assert (status["revision"], status["digest"]) == (1, digest_a)
    assert [(t["revision"], t["weight"]) for t in status["traffic"]] == [(1, 100)]
    by_revision = runner_pids_by_revision(stack.state_dir, uid=obj["metadata"]["uid"])
    assert set(by_revision) == {1}, by_revision
    assert api.invoke(namespace, "held", {"topic": "etcd"}).revision == "1"
    with pytest.raises(client_errors.Conflict):
        api.call(lambda c: c.abort("held", namespace=namespace))


def test_a_first_deploy_does_not_pause_and_says_why(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    _, obj = deploy(
        stack,
        kubectl,
        api,
        namespace,
        "first",
        "pause-first",
        "7.0.0",
        canary={"pauseSeconds": HOLD},
    )
    assert obj["status"]["phase"] == "Ready"
    analyze = step_of(obj, "analyze")
    assert analyze is not None and analyze["state"] == "Skipped"
    assert "a first deploy has no stable revision to pause beside" in analyze["message"]
