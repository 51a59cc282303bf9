"""The quality gate on the real model: a canary whose prompt lost the text its cases depend
on passes the smoke test and the latency gate, and is rolled back by the deterministic
scorers; an unchanged canary is promoted.

Real kubectl, API server, Temporal, worker and runner processes (the deploy tests' stack,
`tests/support/stack.py`) on the session's one model server (Gemma 3 270M, a base model,
at temperature 0: `1, 2, 3, 4,` continues with ` 5, 6, …`). The cases hold the answer to
behaviour (the continuation starts with the next number), never to exact prose.
"""

from __future__ import annotations

from typing import Any

from plnt.processes.modelserver import ModelServer
from tests.support.blocking_api import Api
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack, runner_pids_by_revision
from tests.support.statuses import condition_of, settled, step_of

BACKEND = "gemma"
COUNTING_PROMPT = "{{ inputs.prefix }}"
DEGRADED_PROMPT = "A list of things:"
"""Drops the prefix: what the model continues no longer depends on the case."""


def counting(version: str, prompt: str) -> str:
    """A workflow continuing `prompt`; its own smoke case checks only that text came back."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: counting, version: "{version}"}}
inputs: {{type: object, properties: {{prefix: {{type: string}}}}, required: [prefix]}}
steps:
  - id: more
    kind: model
    mode: completion
    prompt: "{prompt}"
    maxTokens: 6
    temperature: 0
    seed: 0
output: steps.more.output
smoke:
  inputs: {{prefix: "1, 2, 3, 4,"}}
  expect: {{jsonSchema: {{type: string, minLength: 1}}}}
"""


CASES = [
    {
        "name": f"after-{last}",
        "inputs": {"prefix": ", ".join(str(n) for n in range(last - 3, last + 1)) + ","},
        "expect": [{"regex": rf"^\s*{last + 1}\b", "name": "next-number"}],
    }
    for last in (4, 13, 22)
]
CANARY = {
    "weight": 20,
    "analysis": {"requests": 2, "maxErrorRate": 0.0, "maxP95Ms": 30000},
    "evaluation": {"cases": CASES, "maxRegression": 0},
}


def revision_settled(revision: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == revision

    return check


def degraded(obj: dict[str, Any]) -> bool:
    found = condition_of(obj, "Degraded")
    return settled(obj) and found is not None and found["status"] == "True"


def test_a_degraded_prompt_is_rolled_back_by_its_scores_and_an_unchanged_one_promoted(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, model_server: ModelServer
) -> None:
    apply(
        kubectl,
        namespace,
        backend_manifest(
            BACKEND, "openai", endpoint=model_server.endpoint, models=[model_server.model]
        ),
    )
    backend = {"name": BACKEND}
    ref_1, digest_1 = stack.spec("count-1", text=counting("1", COUNTING_PROMPT))
    apply(kubectl, namespace, workflowrun("count", ref_1, digest_1, backend=backend))
    api.wait(namespace, "count", revision_settled(1), timeout=180, message="revision 1")

    # Revision 2: the prompt lost the prefix. Smoke and latency pass; the scores do not.
    ref_2, digest_2 = stack.spec("count-2", text=counting("2", DEGRADED_PROMPT))
    run_2 = workflowrun("count", ref_2, digest_2, backend=backend, canary=CANARY)
    apply(kubectl, namespace, run_2)
    obj = api.wait(namespace, "count", degraded, timeout=300, message="Degraded True")
    assert [step_of(obj, name)["state"] for name in ("smoke", "analyze", "evaluate")] == [  # type: ignore[index]
        "Succeeded",
        "Succeeded",
        "Failed",
    ]
    condition = condition_of(obj, "Degraded")
    assert condition is not None and condition["reason"] == "EvaluationFailed", condition
    assert condition["message"].startswith(
        "evaluation failed: next-number pass rate 0.00 < min 1.00; stable 1.00,"
        " regression 1.00 > max 0.00 (0/3)"
    ), condition["message"]
    rollback = step_of(obj, "rollback")
    assert rollback is not None and rollback["state"] == "Compensated", rollback
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest_1)
    assert [t["revision"] for t in obj["status"]["traffic"]] == [1]  # the canary's share back
    uid = obj["metadata"]["uid"]
    assert set(runner_pids_by_revision(stack.state_dir, uid=uid)) == {1}

    record = obj["status"]["lastEvaluation"]
    assert (record["revision"], record["stableRevision"], record["passed"]) == (2, 1, False)
    assert [case["name"] for case in record["cases"]] == ["after-4", "after-13", "after-22"]
    for case, last in zip(record["cases"], (4, 13, 22), strict=True):
        assert case["stable"]["scores"] == [{"scorer": "next-number", "passed": True, "detail": ""}]
        assert case["canary"]["scores"][0]["passed"] is False
        assert str(last + 1) in case["stable"]["output"]
    (scorer,) = record["scorers"]
    assert (scorer["canaryPassRate"], scorer["stablePassRate"]) == (0.0, 1.0)

    events = api.events(namespace, "count")
    warnings = [e for e in events if e.get("type") == "Warning"]
    assert any(e["reason"] == "EvaluationFailed" for e in warnings), warnings
    described = kubectl.run("describe", "-n", namespace, "wfr/count").stdout
    assert "EvaluationFailed" in described and "pass rate 0.00 < min 1.00" in described

    # Revision 3: the prompt as revision 1 had it (a new version, so a new digest).
    ref_3, digest_3 = stack.spec("count-3", text=counting("3", COUNTING_PROMPT))
    run_3 = workflowrun("count", ref_3, digest_3, backend=backend, canary=CANARY)
    apply(kubectl, namespace, run_3)
    obj = api.wait(namespace, "count", revision_settled(3), timeout=300, message="revision 3")
    evaluate = step_of(obj, "evaluate")
    assert evaluate is not None and evaluate["state"] == "Succeeded", evaluate
    assert evaluate["message"].startswith(
        "evaluation passed: 3 case(s), next-number pass rate 1.00 >= min 1.00; stable 1.00,"
        " regression 0.00 <= max 0.00 (3/3)"
    ), evaluate["message"]
    record = obj["status"]["lastEvaluation"]
    assert (record["revision"], record["stableRevision"], record["passed"]) == (3, 1, True)
    for case in record["cases"]:
        assert case["canary"]["output"] == case["stable"]["output"]  # temperature 0, one model
    passed = [e for e in api.events(namespace, "count") if e.get("reason") == "EvaluationPassed"]
    assert passed and passed[-1]["type"] == "Normal"
