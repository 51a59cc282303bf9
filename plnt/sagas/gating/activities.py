"""The quality gate's activities: the smoke case, the analysis and the evaluation.

The deploy's smoke, analyze and evaluate steps schedule these by name
(`plnt.sagas.activitynames`); each runs on the worker's API client, spec cache and HTTP
session (the deploy activities', which close them once). They probe replicas over plain
HTTP (`plnt.sagas.probing.probes`), score answers (`scoring`, `judging`, `evaluating`) and
read shadow pairs through the API; a failure is raised as its typed `Failure`
(`plnt.sagas.activityfailures`), retryable only when retrying can fix it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
from temporalio import activity

from plnt.api import evaluations as ev
from plnt.api.evaluations import CanaryEvaluation
from plnt.api.shadows import CanaryShadow
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.harness import Progress
from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.activityfailures import fail, spec_failure
from plnt.sagas.failures import Failure
from plnt.sagas.gating import evaluating, judging, shadowing
from plnt.sagas.probing import probes as probing
from plnt.sagas.speccache import SpecCache
from plnt.workflowspec import documents, model
from plnt.workflowspec import errors as spec_errors


class GateActivities:
    """Judging the canary, on shared clients: `http` hands out the worker's HTTP session."""

    def __init__(
        self,
        *,
        api: PlntClient,
        specs: SpecCache,
        http: Callable[[], aiohttp.ClientSession],
        probe_timeout: float = 30.0,
    ) -> None:
        self.api = api
        self.specs = specs
        self.http = http
        self.probe_timeout = probe_timeout

    def all(self) -> list[Any]:
        """Every activity, for `Worker(activities=...)`."""
        return [self.smoke, self.analyze, self.evaluate]

    async def _smoke_case(
        self, ref: str, digest: str, inputs: dict[str, Any] | None, expect: dict[str, Any] | None
    ) -> tuple[dict[str, Any], model.Expectations] | None:
        try:
            _, workflow = await self.specs.workflow(ref, digest)
        except (spec_errors.SourceError, documents.SpecError) as error:
            raise spec_failure(error) from error
        case = workflow.smoke
        chosen_inputs = inputs if inputs is not None else (case.inputs if case else None)
        if chosen_inputs is None:
            return None
        if expect is not None:
            try:
                expectations = model.Expectations.model_validate(expect)
            except ValueError as error:
                raise fail(Failure.INVALID_SPEC, f"spec.canary.smoke.expect: {error}") from error
        else:
            expectations = case.expect if case else model.Expectations()
        return chosen_inputs, expectations

    @activity.defn(name=activitynames.SMOKE)
    async def smoke(self, request: v.SmokeRequest) -> v.SmokeResult:
        """Run the smoke case (the run's, else the spec's) against every canary replica."""
        attempt = activity.info().attempt
        case = await self._smoke_case(request.ref, request.digest, request.inputs, request.expect)
        if case is None:
            return v.SmokeResult("no smoke case in the run or the spec", True, attempt)
        try:
            message = await probing.run_smoke(self.http(), request.endpoints, *case)
        except probing.SmokeFailed as error:
            raise fail(Failure.SMOKE_FAILED, str(error)) from error
        except probing.Unreachable as error:
            raise fail(Failure.UNREACHABLE, str(error), retryable=True) from error
        return v.SmokeResult(message, False, attempt)

    @activity.defn(name=activitynames.ANALYZE)
    async def analyze(self, request: v.AnalysisRequest) -> v.AnalysisResult:
        """Bench the canary and the stable side by side and hold the canary to the limits."""
        case = await self._smoke_case(request.ref, request.digest, request.inputs, None)
        inputs = case[0] if case else {}
        plan = probing.analysis_plan(
            requests=request.requests,
            rate=request.rate,
            duration=request.duration_seconds,
            inputs=inputs,
            timeout=self.probe_timeout,
        )
        limits = probing.Limits(
            max_error_rate=request.max_error_rate,
            max_p95_ms=request.max_p95_milliseconds,
            min_cache_hit_rate=request.min_cache_hit_rate,
        )

        def beat(progress: Progress) -> None:
            activity.heartbeat(
                f"{progress.label} {progress.requests} requests, {progress.errors} errors,"
                f" p99 {progress.p99_ms:.0f} ms"
            )

        try:
            verdict = await probing.analyze(
                request.canary, request.stable, plan, limits, progress=beat
            )
        except probing.AnalysisFailed as error:
            raise fail(Failure.ANALYSIS_FAILED, str(error)) from error
        return v.AnalysisResult(
            verdict.message,
            verdict.error_rate,
            verdict.p95,
            verdict.stable_p95,
            activity.info().attempt,
            canary=verdict.canary.to_json(),
            stable=verdict.stable.to_json() if verdict.stable is not None else None,
        )

    async def _shadow_pairs(
        self, request: v.EvaluationRequest, shadow: CanaryShadow
    ) -> shadowing.Collected:
        """The shadow pairs of the canary revision, read until enough or the timeout."""

        async def read() -> dict[str, Any]:
            return await self.api.shadow_pairs(
                request.name, revision=request.revision, namespace=request.namespace
            )

        try:
            return await shadowing.collect(
                read,
                want=shadow.min_comparisons,
                timeout_seconds=shadow.timeout_seconds,
                beat=activity.heartbeat,
            )
        except client_errors.ClientError as error:  # the API server: worth retrying
            raise fail(Failure.UNREACHABLE, f"shadow traffic: {error}", retryable=True) from error

    @activity.defn(name=activitynames.EVALUATE)
    async def evaluate(self, request: v.EvaluationRequest) -> v.EvaluationResult:
        """Run the evaluation's cases on canary and stable side by side, and score them.

        The verdict is returned, not raised: the workflow records it in status either way.
        """
        try:
            evaluation = CanaryEvaluation.model_validate(request.evaluation)
            shadow = CanaryShadow.model_validate(request.shadow) if request.shadow else None
            cases = await evaluating.load_cases(evaluation, self.specs)
        except spec_errors.DigestMismatch as error:
            raise fail(Failure.DIGEST_MISMATCH, f"evaluation dataset: {error}") from error
        except spec_errors.SourceError as error:
            raise spec_failure(error) from error
        except evaluating.InvalidDataset as error:
            raise fail(Failure.INVALID_DATASET, str(error)) from error
        except ValueError as error:  # admission validated it: an older or foreign spec
            raise fail(Failure.INVALID_DATASET, f"spec.canary.evaluation: {error}") from error
        judge = None
        shadow_expect = (shadow.expect or []) if shadow is not None else []
        shadow_judges = [ev.EvaluationCase(name="shadow", expect=shadow_expect)]
        if names := judging.judge_backends([*cases, *shadow_judges]):
            listed = await self.api.list_backends(namespace=request.namespace)
            try:
                targets = judging.targets_of(listed, names)
            except judging.JudgeFailed as error:
                raise fail(Failure.JUDGE_FAILED, str(error), retryable=True) from error
            judge = judging.Judge(self.http(), targets, timeout=self.probe_timeout)
        scored: list[evaluating.Scored] = []
        shortfall: str | None = None
        collected: shadowing.Collected | None = None
        if shadow is not None and request.stable:
            collected = await self._shadow_pairs(request, shadow)
            scored = shadowing.cases_of(collected.pairs, shadow)
            shortfall = shadowing.shortfall(collected, shadow)
        try:
            record = await evaluating.evaluate(
                self.http(),
                evaluation,
                cases,
                canary=request.canary,
                stable=request.stable,
                judge=judge,
                progress=activity.heartbeat,
                scored=scored,
                shortfall=shortfall,
            )
        except probing.Unreachable as error:
            raise fail(Failure.UNREACHABLE, str(error), retryable=True) from error
        except judging.JudgeFailed as error:
            raise fail(Failure.JUDGE_FAILED, str(error), retryable=True) from error
        if collected is not None:
            record.shadow_comparisons = len(collected.pairs)
            record.shadow_dropped = collected.dropped
        return v.EvaluationResult(
            passed=record.passed,
            message=record.message,
            record=record.model_dump(mode="json", by_alias=True),
            attempt=activity.info().attempt,
        )
