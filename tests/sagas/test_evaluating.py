"""The quality gate's activity side: cases from the spec and a pinned dataset, answers of
canary and stable side by side, the record, and the judge protocol.

Runners are stand-ins on loopback (`POST /invoke` answering by a rule), the dataset is
published to a real OCI layout and fetched through the real spec cache, and the judge is
the scripted stand-in of `tests/support/judge.py`. The deploy end to end, on the real
model, is in `tests/model/test_quality_gate.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plnt.api import evaluations as ev
from plnt.client.clients import PlntClient
from plnt.client.kubeconfig import Connection
from plnt.sagas import values as v
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.failures import Failure
from plnt.sagas.gating import evaluating, judging
from plnt.sagas.gating.activities import GateActivities
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets.local import LocalTarget
from plnt.sagas.worker import gate_activities
from plnt.workflowspec import sources
from tests.support.judge import always, judge_stand_in, prefer

Answering = Callable[[dict[str, Any]], Any]


@asynccontextmanager
async def runner(answering: Answering) -> AsyncIterator[str]:
    """A runner stand-in: `POST /invoke` answers `{"output": answering(inputs)}`."""

    async def invoke(request: web.Request) -> web.Response:
        inputs = (await request.json())["inputs"]
        if inputs.get("fail"):
            return web.json_response({"error": {"message": "step failed"}}, status=502)
        return web.json_response({"output": answering(inputs)})

    app = web.Application()
    app.router.add_post("/invoke", invoke)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def counting(inputs: dict[str, Any]) -> str:
    """What the model does: continue the count."""
    last = int(inputs["prefix"].rstrip(", ").split(",")[-1])
    return ", ".join(str(n) for n in range(last + 1, last + 4))


def degraded(inputs: dict[str, Any]) -> str:
    """A canary whose prompt lost the prefix: it continues nothing in particular."""
    return " the"


CASES = [
    {
        "name": f"from-{n}",
        "inputs": {"prefix": f"{n}, {n + 1},"},
        "expect": [{"contains": str(n + 2)}],
    }
    for n in (1, 4, 7)
]


@pytest.fixture
async def activities(tmp_path: Path) -> AsyncIterator[GateActivities]:
    api = PlntClient(Connection(server="https://127.0.0.1:9"))  # never reached here
    built = DeployActivities(
        api=api, target=LocalTarget(tmp_path / "runners"), specs=SpecCache(tmp_path / "specs")
    )
    try:
        yield gate_activities(built)
    finally:
        await built.close()


async def publish(tmp_path: Path, data: bytes, tag: str = "evals") -> tuple[str, str]:
    ref = f"oci-layout:{tmp_path / 'layout'}:{tag}"
    pinned = await sources.publish(data, ref)
    return ref, str(pinned.digest)


async def run(
    activities: GateActivities, evaluation: dict[str, Any], canary: str, stable: str | None
) -> v.EvaluationResult:
    request = v.EvaluationRequest(
        namespace="default",
        canary=[canary],
        stable=[stable] if stable else [],
        evaluation=evaluation,
    )
    result = await ActivityEnvironment().run(activities.evaluate, request)
    assert isinstance(result, v.EvaluationResult)
    return result


async def test_an_unchanged_canary_passes_with_every_case_answered_by_both_revisions(
    activities: GateActivities,
) -> None:
    async with runner(counting) as canary, runner(counting) as stable:
        result = await run(activities, {"cases": CASES, "maxRegression": 0}, canary, stable)
    assert result.passed, result.message
    record = ev.EvaluationRecord.model_validate(result.record)
    assert [case.name for case in record.cases] == ["from-1", "from-4", "from-7"]
    for case in record.cases:
        assert case.stable is not None
        assert case.canary.output == case.stable.output
        assert [s.passed for s in case.canary.scores] == [True]
    (verdict,) = record.scorers
    assert (verdict.canary_pass_rate, verdict.stable_pass_rate, verdict.regression) == (1, 1, 0)
    assert result.message.startswith("evaluation passed: 3 case(s), contains pass rate 1.00")


async def test_a_degraded_canary_fails_with_its_numbers_against_the_stables(
    activities: GateActivities,
) -> None:
    async with runner(degraded) as canary, runner(counting) as stable:
        result = await run(activities, {"cases": CASES, "maxRegression": 0}, canary, stable)
    assert not result.passed
    assert result.message == (
        "evaluation failed: contains pass rate 0.00 < min 1.00; stable 1.00,"
        " regression 1.00 > max 0.00 (0/3)"
    )
    record = ev.EvaluationRecord.model_validate(result.record)
    assert record.passed is False
    first = record.cases[0]
    assert first.canary.scores[0].detail == "' the' does not contain '3'"
    assert first.stable is not None and first.stable.scores[0].passed


async def test_a_first_deploy_is_held_to_the_absolute_limits_only(
    activities: GateActivities,
) -> None:
    evaluation = {"cases": CASES, "minPassRate": 0.6, "maxRegression": 0}
    async with runner(lambda inputs: "3") as canary:  # passes the first case only
        result = await run(activities, evaluation, canary, None)
    assert not result.passed
    assert result.message.startswith("evaluation failed: contains pass rate 0.33 < min 0.60 (1/3)")
    record = ev.EvaluationRecord.model_validate(result.record)
    assert all(case.stable is None for case in record.cases)


async def test_a_failed_invocation_fails_its_checks_with_the_runners_error(
    activities: GateActivities,
) -> None:
    cases = [{"name": "bad", "inputs": {"fail": True}, "expect": [{"contains": "x"}]}]
    async with runner(counting) as canary:
        result = await run(activities, {"cases": cases}, canary, None)
    record = ev.EvaluationRecord.model_validate(result.record)
    assert record.cases[0].canary.error == "HTTP 502: step failed"
    assert not result.passed


@pytest.mark.parametrize("form", ["yaml-list", "cases-object", "json-lines"])
async def test_dataset_cases_are_pulled_verified_and_run_after_the_inline_ones(
    activities: GateActivities, tmp_path: Path, form: str
) -> None:
    more = [{"name": "from-10", "inputs": {"prefix": "10, 11,"}, "expect": [{"regex": r"\b12\b"}]}]
    data = {
        "yaml-list": yaml.safe_dump(more),
        "cases-object": json.dumps({"cases": more}),
        "json-lines": "\n".join(json.dumps(case) for case in more) + "\n",
    }[form].encode()
    ref, digest = await publish(tmp_path, data)
    evaluation = {"cases": CASES[:1], "dataset": {"ref": ref, "digest": digest}}
    async with runner(counting) as canary, runner(counting) as stable:
        result = await run(activities, evaluation, canary, stable)
    assert result.passed, result.message
    record = ev.EvaluationRecord.model_validate(result.record)
    assert [case.name for case in record.cases] == ["from-1", "from-10"]
    assert [v.name for v in record.scorers] == ["contains", "regex"]
    assert record.dataset is not None and record.dataset.digest == digest


async def test_a_dataset_whose_digest_differs_fails_for_good_naming_both_digests(
    activities: GateActivities, tmp_path: Path
) -> None:
    ref, actual = await publish(tmp_path, yaml.safe_dump(CASES).encode())
    pinned = "sha256:" + hashlib.sha256(b"another dataset").hexdigest()
    evaluation = {"dataset": {"ref": ref, "digest": pinned}}
    async with runner(counting) as canary:
        with pytest.raises(ApplicationError) as raised:
            await run(activities, evaluation, canary, None)
    error = raised.value
    assert error.type == Failure.DIGEST_MISMATCH.value and error.non_retryable
    assert "evaluation dataset" in error.message
    assert pinned in error.message and actual in error.message


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"[]", "expected a non-empty list of cases"),
        (b"{}", "cases[0]"),
        (b"- {name: a, expect: [{regex: '('}]}", "cases[0].expect[0].regex"),
        (b"- {inputs: {}}", "cases[0].name"),
        (b"{not json\n[", "neither YAML, JSON nor JSON Lines"),
    ],
)
async def test_a_dataset_that_is_not_cases_fails_for_good_saying_where(
    activities: GateActivities, tmp_path: Path, data: bytes, says: str
) -> None:
    ref, digest = await publish(tmp_path, data)
    async with runner(counting) as canary:
        with pytest.raises(ApplicationError) as raised:
            await run(activities, {"dataset": {"ref": ref, "digest": digest}}, canary, None)
    assert raised.value.type == Failure.INVALID_DATASET.value and raised.value.non_retryable
    assert says in raised.value.message and ref in raised.value.message


async def test_dataset_case_names_may_not_repeat_inline_ones(
    activities: GateActivities, tmp_path: Path
) -> None:
    ref, digest = await publish(tmp_path, yaml.safe_dump(CASES[:1]).encode())
    evaluation = {"cases": CASES[:1], "dataset": {"ref": ref, "digest": digest}}
    async with runner(counting) as canary:
        with pytest.raises(ApplicationError, match="also used inline: from-1"):
            await run(activities, evaluation, canary, None)


def test_long_outputs_are_cut_in_the_record() -> None:
    assert evaluating.kept("x" * 10) == "x" * 10
    cut = evaluating.kept("x" * 1000)
    assert isinstance(cut, str) and len(cut) == evaluating.MAX_OUTPUT_CHARS + 1
    assert evaluating.kept({"a": "y" * 1000}).startswith('{"a": "yyy')


# -- the judge protocol, against the stand-in ---------------------------------------------

JUDGED = [
    {
        "name": f"from-{n}",
        "inputs": {"prefix": f"{n}, {n + 1},"},
        "expect": [
            {"contains": str(n + 2)},
            {"judge": {"backend": "judge", "rubric": "The answer continuing the count wins."}},
        ],
    }
    for n in (1, 4)
]


async def judged(
    preference: Callable[[str, str], str], canary: Answering, *, min_win_rate: float = 0.5
) -> tuple[ev.EvaluationRecord, list[dict[str, Any]]]:
    evaluation = ev.CanaryEvaluation.model_validate(
        {"cases": JUDGED, "minPassRate": 0, "minWinRate": min_win_rate}
    )
    async with (
        judge_stand_in(preference) as stand_in,
        runner(canary) as canary_url,
        runner(counting) as stable_url,
        aiohttp.ClientSession() as session,
    ):
        targets = judging.targets_of(
            [{"metadata": {"name": "judge"}, "spec": {"endpoint": stand_in.endpoint,
                                                      "models": ["stand-in"]}}],
            {"judge"},
        )  # fmt: skip
        judge = judging.Judge(session, targets, timeout=10)
        record = await evaluating.evaluate(
            session, evaluation, evaluation.cases, canary=[canary_url], stable=[stable_url],
            judge=judge,
        )  # fmt: skip
    return record, stand_in.requests


async def test_the_judge_is_asked_twice_per_case_with_the_order_swapped() -> None:
    _, requests = await judged(prefer("3, 4"), degraded)
    assert len(requests) == 4  # two cases, two orders each
    first, second = (r["messages"][-1]["content"] for r in requests[:2])
    assert "Answer A:\n the" in first and "Answer B:\n 3, 4" not in first  # canary first
    assert first.index("3, 4, 5") > first.index("Answer B")
    assert second.index("3, 4, 5") < second.index("Answer B")  # stable first
    assert all(r["temperature"] == 0 and r["model"] == "stand-in" for r in requests)
    assert "The answer continuing the count wins." in first


async def test_a_judge_that_prefers_the_stable_in_both_orders_fails_the_canary() -> None:
    record, _ = await judged(prefer("3, 4, 5"), degraded)
    judgement = record.cases[0].judgements[0]
    assert (judgement.canary_first, judgement.stable_first, judgement.outcome) == (
        "stable",
        "stable",
        "stable",
    )
    judge = next(v for v in record.scorers if v.type == "judge")
    assert (judge.wins, judge.ties, judge.losses, judge.win_rate) == (0, 1, 1, 0.25)
    assert not judge.passed and not record.passed
    assert "judge win rate 0.25 < min 0.50 (0 won, 1 tied, 1 lost)" in record.message
    (who,) = record.judges
    assert (who.backend, who.model, who.temperature) == ("judge", "stand-in", 0.0)
    assert who.rubric == "The answer continuing the count wins."


async def test_a_judge_with_position_bias_only_ever_ties() -> None:
    record, _ = await judged(always("A"), degraded)
    outcomes = [
        (j.canary_first, j.stable_first, j.outcome) for c in record.cases for j in c.judgements
    ]
    assert outcomes == [("canary", "stable", "tie")] * 2
    judge = next(v for v in record.scorers if v.type == "judge")
    assert (judge.win_rate, judge.passed) == (0.5, True)  # ties halved: 0.5 meets 0.5


async def test_equal_answers_tie_and_meet_the_default_win_rate() -> None:
    record, _ = await judged(prefer("3, 4, 5"), counting)
    assert [j.outcome for c in record.cases for j in c.judgements] == ["tie", "tie"]
    assert record.passed, record.message


@pytest.mark.parametrize(
    ("reply", "letter"),
    [("A", "A"), (" b.", "B"), ("**A** because", "A"), ("T", "T"), ("Both", "T"), ("", "T")],
)
def test_a_judges_reply_is_read_as_a_b_or_a_tie(reply: str, letter: str) -> None:
    assert judging.letter(reply) == letter


def test_a_judge_backend_that_is_missing_is_named() -> None:
    listed = [{"metadata": {"name": "other"}, "spec": {"endpoint": "http://x/v1"}}]
    with pytest.raises(judging.JudgeFailed, match="judge, nojudge"):
        judging.targets_of(listed, {"judge", "nojudge"})


async def test_canary_and_stable_are_asked_in_the_same_window() -> None:
    """Both invocations of a case are in flight together: each stand-in waits for the other."""
    arrived = {"canary": asyncio.Event(), "stable": asyncio.Event()}

    async def invoke_of(me: str, other: str) -> web.Application:
        async def invoke(request: web.Request) -> web.Response:
            arrived[me].set()
            await asyncio.wait_for(arrived[other].wait(), timeout=10)
            return web.json_response({"output": counting((await request.json())["inputs"])})

        app = web.Application()
        app.router.add_post("/invoke", invoke)
        return app

    servers = [
        TestServer(await invoke_of("canary", "stable"), host="127.0.0.1"),
        TestServer(await invoke_of("stable", "canary"), host="127.0.0.1"),
    ]
    for server in servers:
        await server.start_server()
    try:
        evaluation = ev.CanaryEvaluation.model_validate({"cases": CASES[:1]})
        async with aiohttp.ClientSession() as session:
            record = await evaluating.evaluate(
                session, evaluation, evaluation.cases,
                canary=[str(servers[0].make_url("")).rstrip("/")],
                stable=[str(servers[1].make_url("")).rstrip("/")],
            )  # fmt: skip
    finally:
        for server in servers:
            await server.close()
    assert record.passed
