"""The quality gate's I/O: the cases, their answers on canary and stable, the record.

Cases come from `spec.canary.evaluation.cases` and from its pinned `dataset`, fetched and
verified by the worker's spec cache exactly as a workflow spec is (the same sources, the
same digest check: a mismatch names both digests). Each case is sent to the canary and to
the stable revision at the same time, through the runners' own `POST /invoke` as the
smoke case and the analysis do (`probing.invoke`), so both answer in the same window.
The answers are scored by `scoring` (pure) and, for judge scorers, compared by a model
(`judging`). The result is the `EvaluationRecord` the saga writes to
`status.lastEvaluation`; whether it passed is for the workflow to act on.

Errors: `InvalidDataset` (a dataset that is not cases: a new generation must fix it; read
by `plnt.workflowspec.datasets`, the reader `plnt push` checks a dataset with),
the spec cache's `SourceError`s for the fetch, `probing.Unreachable` for a runner that
cannot be reached (worth retrying), `judging.JudgeFailed` for a judge that does not
answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from plnt.api import evaluations as ev
from plnt.sagas.gating import judging, scoring
from plnt.sagas.probing import probes as probing
from plnt.sagas.speccache import SpecCache
from plnt.workflowspec.datasets import InvalidDataset as InvalidDataset
from plnt.workflowspec.datasets import parse_dataset as parse_dataset

MAX_OUTPUT_CHARS = 400
"""Output text kept per answer in the record (status is no place for long answers)."""


async def load_cases(evaluation: ev.CanaryEvaluation, specs: SpecCache) -> list[ev.EvaluationCase]:
    """The inline cases, then the dataset's (verified against its pinned digest)."""
    cases = list(evaluation.cases)
    if evaluation.dataset is not None:
        data = await specs.ensure(evaluation.dataset.ref, evaluation.dataset.digest)
        try:
            more = parse_dataset(data)
        except InvalidDataset as error:
            raise InvalidDataset(f"dataset {evaluation.dataset.ref}: {error}") from None
        names = {case.name for case in cases}
        clash = sorted(names & {case.name for case in more})
        if clash:
            raise InvalidDataset(
                f"dataset {evaluation.dataset.ref}: case names also used inline: "
                + ", ".join(clash)
            )
        cases.extend(more)
    if len(cases) > ev.MAX_CASES:
        raise InvalidDataset(f"{len(cases)} cases in all, more than {ev.MAX_CASES}")
    return cases


def kept(output: Any) -> Any:
    """The output as the record keeps it: long text cut, large JSON as cut text."""
    if isinstance(output, str):
        return output if len(output) <= MAX_OUTPUT_CHARS else output[:MAX_OUTPUT_CHARS] + "…"
    text = json.dumps(output, sort_keys=True, ensure_ascii=False)
    return output if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "…"


async def answer(
    session: aiohttp.ClientSession, endpoint: str, inputs: dict[str, Any]
) -> tuple[ev.Answer, Any]:
    """One invocation: the record's answer, and the whole output (for scorers and judges)."""
    began = time.perf_counter()
    status, body = await probing.invoke(session, endpoint, inputs)
    milliseconds = round((time.perf_counter() - began) * 1000.0, 1)
    if status != 200 or not isinstance(body, dict):
        error = body.get("error", {}) if isinstance(body, dict) else {}
        detail = error.get("message") if isinstance(error, dict) else None
        return ev.Answer(error=f"HTTP {status}: {detail or body}", milliseconds=milliseconds), None
    output = body.get("output")
    trajectory = ev.trajectory_of(body.get("trace"))
    return ev.Answer(output=kept(output), trajectory=trajectory, milliseconds=milliseconds), output


Progress = Callable[[str], None]


@dataclass
class Scored:
    """A case answered elsewhere (a shadow pair): its scorers, its record with the
    deterministic scores applied, and both whole outputs for judge scorers."""

    case: ev.EvaluationCase
    record: ev.CaseRecord
    canary_output: Any
    stable_output: Any


async def _judge(
    judge: judging.Judge | None,
    case: ev.EvaluationCase,
    record: ev.CaseRecord,
    canary_output: Any,
    stable_output: Any,
) -> None:
    assert record.stable is not None
    for scorer in case.expect:
        if scorer.judge is None:
            continue
        if judge is None:
            raise judging.JudgeFailed(f"{scorer.key}: no judge client")
        record.judgements.append(
            await judge.compare(
                scorer, case.inputs, record.canary, canary_output, record.stable, stable_output
            )
        )


async def evaluate(
    session: aiohttp.ClientSession,
    evaluation: ev.CanaryEvaluation,
    cases: Sequence[ev.EvaluationCase],
    *,
    canary: Sequence[str],
    stable: Sequence[str],
    judge: judging.Judge | None = None,
    progress: Progress | None = None,
    scored: Sequence[Scored] = (),
    shortfall: str | None = None,
) -> ev.EvaluationRecord:
    """Run every case on canary and stable side by side, score, and judge the limits.

    `scored` are cases answered elsewhere (shadow pairs, with a stable) judged and held to
    the same limits; `shortfall`, when set, fails the gate with that reason first.
    """
    began = time.perf_counter()
    has_stable = bool(stable)
    records: list[ev.CaseRecord] = []
    for index, case in enumerate(cases):
        calls = [answer(session, canary[index % len(canary)], case.inputs)]
        if has_stable:
            calls.append(answer(session, stable[index % len(stable)], case.inputs))
        answers = await asyncio.gather(*calls)
        (canary_answer, canary_output), *rest = answers
        canary_answer.scores = scoring.score(case.expect, canary_answer)
        record = ev.CaseRecord(name=case.name, inputs=case.inputs, canary=canary_answer)
        if rest:
            (stable_answer, stable_output) = rest[0]
            stable_answer.scores = scoring.score(case.expect, stable_answer)
            record.stable = stable_answer
            await _judge(judge, case, record, canary_output, stable_output)
        records.append(record)
        if progress is not None:
            progress(f"case {index + 1}/{len(cases)} {case.name}")
    for index, more in enumerate(scored):
        await _judge(judge, more.case, more.record, more.canary_output, more.stable_output)
        records.append(more.record)
        if progress is not None:
            progress(f"shadow comparison {index + 1}/{len(scored)}")
    every = [*cases, *(more.case for more in scored)]
    found = scoring.verdicts(evaluation, every, records, has_stable=has_stable)
    message = scoring.summary(found, cases=len(cases), has_stable=has_stable)
    if scored:
        message = message.replace(" case(s)", f" case(s) and {len(scored)} shadow comparison(s)", 1)
    if shortfall is not None:
        message = f"evaluation failed: {shortfall}; " + message.split(": ", 1)[1]
    return ev.EvaluationRecord(
        passed=shortfall is None and all(v.passed for v in found),
        message=message,
        dataset=evaluation.dataset,
        duration_milliseconds=round((time.perf_counter() - began) * 1000.0, 1),
        scorers=found,
        judges=judge.records(every) if judge is not None and has_stable else [],
        cases=records,
    )
