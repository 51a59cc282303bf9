"""Shadow traffic in the quality gate, end to end through Temporal.

Real kubectl, API server, Temporal and worker, real runner processes on the echo backend
(deterministic, so the default `agreement` scorer passes when canary and stable answer
alike). The canary takes no live traffic (`weight: 0`): while its shadow window is open
a caller only ever reaches the stable, and the API server mirrors the calls to the
canary; the evaluate step waits for `minComparisons` pairs and scores them. Without
callers the gate fails naming the shortfall, and the rollout compensates.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.support.blocking_api import Api
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack, runner_pids_by_revision
from tests.support.statuses import condition_of, settled, step_of

CASE = {
    "name": "etcd",
    "inputs": {"topic": "etcd"},
    "expect": [{"contains": "etcd"}, {"jsonSchema": {"type": "object"}}],
}
EVALUATION = {"cases": [CASE]}
SHADOW = {"percent": 100, "minComparisons": 3, "timeoutSeconds": 60}


def revision_settled(revision: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == revision

    return check


def degraded(obj: dict[str, Any]) -> bool:
    found = condition_of(obj, "Degraded")
    return settled(obj) and found is not None and found["status"] == "True"


@dataclass
class Calls:
    """What the background caller saw: the revision of each answer, in order, and errors."""

    revisions: list[str | None] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextmanager
def calling(stack: Stack, namespace: str, name: str) -> Iterator[Calls]:
    """Invoke the run again and again on a thread (its own client) until the block ends."""
    calls, stop = Calls(), threading.Event()

    def loop() -> None:
        caller = Api(stack.server.kubeconfig)
        try:
            n = 0
            while not stop.is_set():
                topic = f"live-{n}"
                n += 1
                try:
                    answer = caller.invoke(namespace, name, {"topic": topic})
                except Exception as error:  # recorded, and asserted on by the test
                    calls.errors.append(repr(error))
                    continue
                calls.revisions.append(answer.revision)
                calls.topics.append(topic)
        finally:
            caller.close()

    thread = threading.Thread(target=loop, name="caller", daemon=True)
    thread.start()
    try:
        yield calls
    finally:
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive(), "the caller did not stop"


def test_live_calls_mirrored_to_a_dark_canary_pass_the_gate_and_it_is_promoted(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref_1, digest_1 = stack.spec("shadow-a-1", version="1.0.0")
    apply(kubectl, namespace, workflowrun("lit", ref_1, digest_1))
    api.wait(namespace, "lit", revision_settled(1), timeout=120, message="revision 1")

    ref_2, digest_2 = stack.spec("shadow-a-2", version="2.0.0")
    canary = {"weight": 0, "evaluation": EVALUATION, "shadow": SHADOW}
    with calling(stack, namespace, "lit") as calls:
        apply(kubectl, namespace, workflowrun("lit", ref_2, digest_2, canary=canary))
        obj = api.wait(namespace, "lit", revision_settled(2), timeout=180, message="revision 2")

    assert (obj["status"]["revision"], obj["status"]["digest"]) == (2, digest_2)
    evaluate = step_of(obj, "evaluate")
    assert evaluate is not None and evaluate["state"] == "Succeeded", evaluate
    assert "shadow comparison(s)" in evaluate["message"], evaluate["message"]
    record = obj["status"]["lastEvaluation"]
    assert (record["revision"], record["stableRevision"], record["passed"]) == (2, 1, True)
    assert record["shadowComparisons"] >= 3 and record["shadowDropped"] == 0, record
    shadows = [case for case in record["cases"] if case.get("shadow")]
    assert len(shadows) >= 3, record["cases"]
    for case in shadows:
        assert case["name"].startswith("shadow-"), case
        assert case["inputs"]["topic"] in calls.topics, case  # a caller's own input
        assert case["canary"]["output"] == case["stable"]["output"], case
        assert [s["scorer"] for s in case["canary"]["scores"]] == ["agreement"], case
        assert all(s["passed"] for s in case["canary"]["scores"]), case
    assert [case["name"] for case in record["cases"] if not case.get("shadow")] == ["etcd"]

    # Weight 0: until promotion every caller was answered by the stable, never the canary
    # (after it, by the promoted revision): the revisions are a run of 1s, then of 2s.
    assert not calls.errors, calls.errors
    assert set(calls.revisions) <= {"1", "2"}, set(calls.revisions)
    first_2 = calls.revisions.index("2") if "2" in calls.revisions else len(calls.revisions)
    assert all(r == "1" for r in calls.revisions[:first_2]), calls.revisions
    assert all(r == "2" for r in calls.revisions[first_2:]), calls.revisions
    answered_by_stable = set(calls.topics[:first_2])
    assert {case["inputs"]["topic"] for case in shadows} <= answered_by_stable
    assert [t["revision"] for t in obj["status"]["traffic"]] == [2]  # the window closed


def test_without_live_calls_the_gate_fails_naming_the_shortfall_and_rolls_back(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref_1, digest_1 = stack.spec("shadow-b-1", version="1.0.0")
    apply(kubectl, namespace, workflowrun("dark", ref_1, digest_1))
    api.wait(namespace, "dark", revision_settled(1), timeout=120, message="revision 1")

    ref_2, digest_2 = stack.spec("shadow-b-2", version="2.0.0")
    shadow = {**SHADOW, "timeoutSeconds": 2}
    canary = {"weight": 0, "evaluation": EVALUATION, "shadow": shadow}
    apply(kubectl, namespace, workflowrun("dark", ref_2, digest_2, canary=canary))
    obj = api.wait(namespace, "dark", degraded, timeout=180, message="Degraded True")

    shortfall = "evaluation failed: shadow traffic: 0 of 3 comparisons in 2 s (0 dropped); "
    condition = condition_of(obj, "Degraded")
    assert condition is not None and condition["reason"] == "EvaluationFailed", condition
    assert condition["message"].startswith(shortfall), condition["message"]
    ready = condition_of(obj, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "RolledBack")
    evaluate, rollback = step_of(obj, "evaluate"), step_of(obj, "rollback")
    assert evaluate is not None and evaluate["state"] == "Failed", evaluate
    assert rollback is not None and rollback["state"] == "Compensated", rollback
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest_1)
    assert [t["revision"] for t in obj["status"]["traffic"]] == [1]  # window closed, canary out
    uid = obj["metadata"]["uid"]
    assert set(runner_pids_by_revision(stack.state_dir, uid=uid)) == {1}

    record = obj["status"]["lastEvaluation"]
    assert (record["revision"], record["passed"]) == (2, False)
    assert (record["shadowComparisons"], record["shadowDropped"]) == (0, 0)
    assert [case["name"] for case in record["cases"]] == ["etcd"]  # the case ran and passed
    warnings = [e for e in api.events(namespace, "dark") if e.get("type") == "Warning"]
    failed = [e for e in warnings if e.get("reason") == "EvaluationFailed"]
    assert failed and failed[-1]["message"].startswith(shortfall), warnings
    assert api.invoke(namespace, "dark", {"topic": "after"}).revision == "1"
