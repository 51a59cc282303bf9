"""The quality gate's steps of a deploy: smoke → (route) → analyze → evaluate.

The deploy walks them in its list (`plnt.sagas.deploying.workflow.steps.STEPS`) like any
other step (`Deploy`, `Step` and `Outcome` are the deploy's); here is what each asks of
its activity (`plnt.sagas.gating.activities`, by name) and how a verdict fails the deploy:
a failed smoke case or analysis is a non-retryable `Failure`, a failed evaluation a
`GateFailed` raised here once its record is kept for `status.lastEvaluation`. Analyze
registers "traffic back to the stable revision" before it runs and holds the canary's
weight for `canary.pauseSeconds` with a durable timer. Workflow code: no I/O here.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plnt.api.meta import format_time
    from plnt.api.shadows import CanaryShadow
    from plnt.api.workflowruns import CanaryAnalysis
    from plnt.sagas import activitynames
    from plnt.sagas import failures as f
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow.compensation import Compensation
    from plnt.sagas.deploying.workflow.deploys import Deploy, Step
    from plnt.sagas.deploying.workflow.reporting import Canary, Outcome


class Smoke(Step):
    name, phase, done, fails_as = "smoke", "SmokeTesting", "SmokePassed", "SmokeFailed"

    def enter(self, deploy: Deploy) -> str:
        return "running the smoke case on the canary"

    async def run(self, deploy: Deploy) -> Outcome:
        smoke = await workflow.execute_activity(
            activitynames.SMOKE,
            v.SmokeRequest(
                ref=deploy.ref,
                digest=deploy.digest,
                endpoints=deploy.canary().endpoints,
                inputs=deploy.intent.smoke_input,
                expect=deploy.intent.smoke_expect,
            ),
            result_type=v.SmokeResult,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=f.retry(3, non_retryable=f.SPEC_ERRORS | {f.Failure.SMOKE_FAILED}),
        )
        return Outcome(smoke.message, smoke.attempt, skipped=smoke.skipped)


class Analyze(Step):
    """The synthetic analysis, then the pause with live traffic (`canary.pauseSeconds`).

    While either runs, the canary takes `weight` percent of invocations (when a stable
    revision exists to take the rest). A pause is a durable timer, so an abort or a
    newer generation cancels it like any activity, and compensation moves the traffic
    back. A first deploy has no stable revision to share traffic with: no pause.
    """

    name, phase, done, fails_as = "analyze", "SmokeTesting", "AnalysisPassed", "AnalysisFailed"

    @staticmethod
    def _pause(deploy: Deploy) -> int:
        return deploy.intent.canary.pause_seconds if deploy.state.stable is not None else 0

    @staticmethod
    def _analysis(deploy: Deploy) -> CanaryAnalysis | None:
        """`canary.analysis`; with objectives (`spec.slo`) but none, the default analysis,
        so the canary is held to them (histories from before `spec.slo` have none)."""
        analysis = deploy.intent.analysis
        if analysis is None and deploy.intent.spec.slo is not None:
            return CanaryAnalysis()
        return analysis

    def skip(self, deploy: Deploy) -> str | None:
        if self._analysis(deploy) is not None or self._pause(deploy) or _shadow(deploy):
            return None
        reason = "no analysis configured"
        if deploy.intent.canary.pause_seconds and deploy.state.stable is None:
            reason += "; a first deploy has no stable revision to pause beside"
        return reason

    def compensation(self, deploy: Deploy) -> Compensation | None:
        if deploy.state.stable is None:
            return None
        reporter, intent = deploy.reporter, deploy.intent

        async def traffic_back() -> None:
            await reporter.withdraw_canary(intent)

        return Compensation("traffic back to the stable revision", traffic_back)

    def enter(self, deploy: Deploy) -> str:
        weight = deploy.intent.canary.weight
        shadow = _shadow(deploy)
        window = None
        if shadow is not None:  # the API servers mirror the stable's calls while it is set
            since = format_time(workflow.now())
            window = {"percent": shadow.percent, "queueSize": shadow.queue_size, "since": since}
        if deploy.state.stable is not None:
            installed = deploy.canary()
            deploy.reporter.canary = Canary(
                deploy.revision, deploy.digest, installed.endpoints, weight, window
            )
        pause = self._pause(deploy)
        held = f" for {pause} s" if pause else ""
        mirrored = f"; {shadow.percent}% of the stable's mirrored to it" if shadow else ""
        return f"canary takes {weight}% of invocations{held}{mirrored}"

    async def run(self, deploy: Deploy) -> Outcome:
        verdicts: list[str] = []
        attempt = 1
        analysis = self._analysis(deploy)
        if analysis is not None:
            stable = deploy.state.stable
            objectives = deploy.intent.spec.slo
            result = await workflow.execute_activity(
                activitynames.ANALYZE,
                v.AnalysisRequest(
                    ref=deploy.ref,
                    digest=deploy.digest,
                    canary=deploy.canary().endpoints,
                    stable=stable.endpoints if stable else [],
                    requests=analysis.requests,
                    inputs=deploy.intent.smoke_input,
                    max_error_rate=analysis.max_error_rate,
                    max_p95_milliseconds=_p95_limit(analysis),
                    rate=analysis.rate,
                    duration_seconds=analysis.duration,
                    min_cache_hit_rate=analysis.min_cache_hit_rate,
                    slo=objectives.to_wire() if objectives is not None else None,
                ),
                result_type=v.AnalysisResult,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=10),
                retry_policy=f.retry(2, non_retryable=f.SPEC_ERRORS | {f.Failure.ANALYSIS_FAILED}),
            )
            verdicts.append(result.message)
            attempt = result.attempt
        if pause := self._pause(deploy):
            verdicts.append(await self._hold(deploy, pause))
        return Outcome("; ".join(verdicts), attempt)

    @staticmethod
    async def _hold(deploy: Deploy, seconds: int) -> str:
        """Hold the canary's weight for `seconds`, or until `promote` ends the pause."""
        controls, weight = deploy.controls, deploy.intent.canary.weight
        began = workflow.now()
        controls.pausing, controls.skip_pause = True, False
        try:
            await workflow.wait_condition(lambda: controls.skip_pause, timeout=seconds)
        except TimeoutError:
            return f"canary held {weight}% of invocations for {seconds} s"
        finally:
            controls.pausing = False
        held = int((workflow.now() - began).total_seconds())
        return f"canary held {weight}% of invocations for {held} s, then promoted on request"


def _shadow(deploy: Deploy) -> CanaryShadow | None:
    """The shadow (`canary.shadow`) when a stable exists whose live calls to mirror: the
    analysis opens its window, the evaluation scores its pairs."""
    return deploy.intent.canary.shadow if deploy.state.stable is not None else None


def _p95_limit(analysis: CanaryAnalysis) -> float | None:
    """`maxP95Ms` and `maxP95Milliseconds` are one limit: the smaller when both are set."""
    limits = [x for x in (analysis.max_p95_ms, analysis.max_p95_milliseconds) if x is not None]
    return float(min(limits)) if limits else None


class Evaluate(Step):
    """The quality gate (`canary.evaluation`): cases on canary and stable, scored.

    The activity runs and scores the cases and returns the record; the verdict is acted
    on here, so the record reaches `status.lastEvaluation` whether the gate passed or not:
    a failed gate raises `GateFailed`, and the rollout compensates exactly as for a failed
    analysis (the canary's traffic back, the canary retired, a Warning Event).
    """

    name, phase = "evaluate", "SmokeTesting"
    done, fails_as = "EvaluationPassed", "EvaluationFailed"

    def skip(self, deploy: Deploy) -> str | None:
        return None if deploy.intent.evaluation is not None else "no evaluation configured"

    def enter(self, deploy: Deploy) -> str:
        evaluation = deploy.intent.evaluation
        assert evaluation is not None
        cases = f"{len(evaluation.cases)} case(s)"
        if evaluation.dataset is not None:
            cases += f" and the dataset {evaluation.dataset.ref}"
        beside = " and the stable" if deploy.state.stable is not None else ""
        shadow = _shadow(deploy)
        wants = f", then waiting for {shadow.min_comparisons} shadow comparisons" if shadow else ""
        return f"running {cases} on the canary{beside}{wants}"

    async def run(self, deploy: Deploy) -> Outcome:
        stable = deploy.state.stable
        shadowed = _shadow(deploy)
        shadow = deploy.intent.shadow_json if shadowed is not None else None
        waits = shadowed.timeout_seconds if shadowed is not None else 0
        result = await workflow.execute_activity(
            activitynames.EVALUATE,
            v.EvaluationRequest(
                namespace=deploy.state.run.namespace,
                canary=deploy.canary().endpoints,
                stable=stable.endpoints if stable else [],
                evaluation=deploy.intent.evaluation_json,
                name=deploy.state.run.name,
                revision=deploy.revision,
                shadow=shadow,
            ),
            result_type=v.EvaluationResult,
            start_to_close_timeout=timedelta(minutes=30, seconds=waits),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=f.retry(3, non_retryable=f.SPEC_ERRORS),
        )
        deploy.reporter.evaluation = {
            **result.record,
            "revision": deploy.revision,
            "stableRevision": stable.revision if stable else None,
            "time": format_time(workflow.now()),
        }
        if not result.passed:
            raise f.GateFailed(f.Failure.EVALUATION_FAILED, result.message, result.attempt)
        return Outcome(result.message, result.attempt)


ANALYZE = Analyze()
"""The analysis step, which the route step asks whether the canary takes traffic."""
