"""The `judge` scorer: a model compares the canary's and the stable's answers pairwise.

The protocol, written down because the gate's fairness rests on it:

* The judge is a model behind a PlntBackend (`scorer.judge.backend`), asked through its
  OpenAI-compatible `POST {endpoint}/chat/completions` with the scorer's rubric and
  temperature (default 0), not through the run's own backend.
* For one case it sees the input and two answers labelled A and B, and is asked to reply
  `A`, `B` or `T` (tie). It is asked **twice**, the order swapped: canary as A, then
  stable as A. Models favour a position; an answer that wins in both orders wins, and a
  disagreement counts as a tie.
* A reply that names neither (after trimming, the first letter of the first word) counts
  as a tie for that order; the raw preference is kept in the record.
* An answer that failed (HTTP error) loses to one that did not, without asking; two
  failures tie.

Errors: `JudgeFailed` (the judge could not be reached, or its backend does not exist).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from plnt.api import evaluations as ev
from plnt.sagas.gating import scoring
from plnt.workflowspec.smoke import as_text

Letter = Literal["A", "B", "T"]

SYSTEM = (
    "You are a strict evaluator. You compare two answers, A and B, to the same input under a"
    " rubric. Reply with one letter only: A if answer A is better, B if answer B is better,"
    " T if they are equally good."
)


class JudgeFailed(Exception):
    """The judge model could not give its verdict."""


@dataclass(frozen=True)
class Target:
    """Where a judge scorer's model is served."""

    backend: str
    endpoint: str
    model: str | None


def messages(rubric: str, inputs: dict[str, Any], a: Any, b: Any) -> list[dict[str, str]]:
    """The chat the judge is asked: the rubric, the input, answers A and B."""
    user = (
        f"Rubric: {rubric}\n\n"
        f"Input: {json.dumps(inputs, sort_keys=True, ensure_ascii=False)}\n\n"
        f"Answer A:\n{as_text(a)}\n\n"
        f"Answer B:\n{as_text(b)}\n\n"
        "Which answer is better under the rubric? Reply A, B or T."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def letter(reply: str) -> Letter:
    """The judge's preference in its reply: A, B, or T (a tie, also for anything else)."""
    words = reply.strip().split()
    first = words[0].strip("*.:()[]\"'").upper() if words else ""
    if first in ("A", "B"):
        return first  # type: ignore[return-value]
    return "T"


def outcome(found: Letter, *, canary_is: Literal["A", "B"]) -> ev.Outcome:
    """A preference for a letter as a preference for a revision."""
    if found == "T":
        return "tie"
    return "canary" if found == canary_is else "stable"


class Judge:
    """The judge scorers' models, resolved to endpoints before the cases run."""

    def __init__(
        self, session: aiohttp.ClientSession, targets: dict[str, Target], *, timeout: float
    ) -> None:
        self.session = session
        self.targets = targets
        self.timeout = timeout

    async def ask(self, spec: ev.JudgeSpec, chat: list[dict[str, str]]) -> str:
        target = self.targets.get(spec.backend)
        if target is None:
            raise JudgeFailed(f"judge backend {spec.backend!r} was not resolved")
        body: dict[str, Any] = {
            "messages": chat,
            "temperature": spec.temperature,
            "max_tokens": spec.max_tokens,
        }
        model = spec.model or target.model
        if model:
            body["model"] = model
        url = f"{target.endpoint.rstrip('/')}/chat/completions"
        try:
            async with self.session.post(
                url, json=body, timeout=aiohttp.ClientTimeout(total=self.timeout)
            ) as response:
                if response.status != 200:
                    text = (await response.text())[:200]
                    raise JudgeFailed(f"judge {spec.backend}: HTTP {response.status}: {text}")
                answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise JudgeFailed(f"judge {spec.backend} unreachable: {error!r}") from error
        try:
            return str(answer["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as error:
            raise JudgeFailed(f"judge {spec.backend}: not a chat completion") from error

    async def compare(
        self,
        scorer: ev.Scorer,
        inputs: dict[str, Any],
        canary: ev.Answer,
        canary_output: Any,
        stable: ev.Answer,
        stable_output: Any,
    ) -> ev.Judgement:
        """Ask twice, the order swapped; agreeing preferences stand, else a tie."""
        assert scorer.judge is not None
        if canary.error is not None or stable.error is not None:
            without: ev.Outcome = (
                "tie"
                if canary.error is not None and stable.error is not None
                else ("stable" if canary.error is not None else "canary")
            )
            return ev.Judgement(
                scorer=scorer.key, canary_first=without, stable_first=without, outcome=without
            )
        spec = scorer.judge
        first = letter(
            await self.ask(spec, messages(spec.rubric, inputs, canary_output, stable_output))
        )
        second = letter(
            await self.ask(spec, messages(spec.rubric, inputs, stable_output, canary_output))
        )
        canary_first = outcome(first, canary_is="A")
        stable_first = outcome(second, canary_is="B")
        return ev.Judgement(
            scorer=scorer.key,
            canary_first=canary_first,
            stable_first=stable_first,
            outcome=scoring.judged(canary_first, stable_first),
        )

    def records(self, cases: Sequence[ev.EvaluationCase]) -> list[ev.JudgeRecord]:
        """Who judged, per judge scorer: backend, model, rubric, temperature."""
        found: dict[str, ev.JudgeRecord] = {}
        for case in cases:
            for scorer in case.expect:
                spec = scorer.judge
                if spec is None or scorer.key in found:
                    continue
                target = self.targets.get(spec.backend)
                found[scorer.key] = ev.JudgeRecord(
                    scorer=scorer.key,
                    backend=spec.backend,
                    model=spec.model or (target.model if target else None),
                    rubric=spec.rubric,
                    temperature=spec.temperature,
                )
        return list(found.values())


def judge_backends(cases: Sequence[ev.EvaluationCase]) -> set[str]:
    """The PlntBackends the judge scorers of `cases` name."""
    return {s.judge.backend for case in cases for s in case.expect if s.judge is not None}


def targets_of(backends: Sequence[dict[str, Any]], names: set[str]) -> dict[str, Target]:
    """The judge targets among listed PlntBackends; JudgeFailed naming any missing one."""
    found: dict[str, Target] = {}
    for obj in backends:
        name = (obj.get("metadata") or {}).get("name")
        spec = obj.get("spec") or {}
        if name in names and spec.get("endpoint"):
            models = spec.get("models") or []
            found[name] = Target(name, str(spec["endpoint"]), models[0] if models else None)
    missing = sorted(names - set(found))
    if missing:
        raise JudgeFailed(
            "judge backend(s) without an endpoint or not found: " + ", ".join(missing)
        )
    return found
