"""Executing a workflow's DAG: the walk, `when`, the step cache, resumes and the trace.

Every step runs as a task in one `asyncio.TaskGroup` and waits only for the steps it
`needs`, so independent steps overlap. A step sees the outputs of its ancestors only, which
keeps rendering deterministic however the tasks interleave. When a step fails for good, the
task group cancels the rest and the first failure is raised as a
`plnt.runner.errors.StepFailed` naming the step. The invocation's deadline
(`plnt.runner.deadlines`) is checked before each step starts: a step that would start
after it fails the invocation with `DeadlineExceeded` naming the step (504).

The rest of a step lives in rooms of its own, which this module walks in order:

* `resolving` — the step's templates rendered into its request (the cache key's part);
* `mapping` — a `forEach` step, once per element, `maxParallel` at once;
* `attempting` — each attempt bounded by `timeoutSeconds` and the deadline, retried as the
  step's `retry` policy, the backend's retry budget and the time left allow;
* `calling` — one call by the step's kind: model (the tool loop of `agents`, the
  `responseFormat` of `structured`), http, transform, a called workflow (`subworkflows`,
  whose trace is nested in the step's);
* `executions` — the invocation's state, `StepTrace` and `Execution`.

Control flow: a step whose `when` is false is skipped — its output is None, its dependants
run and see `steps.ID.skipped`, and its trace says why.

Time is measured per step (start/finish offsets from the start of the invocation) and per
backend call; the union of backend intervals is "backend time" in Server-Timing, the rest
of the invocation is "runner time".

A caller may pass `on_step` to `Executor.run`: it is called synchronously, in the step's
task, once per step that finishes — with `None` on success or the step's `RunnerError` on
failure (steps cancelled because another failed are not reported). It must not block; the
streaming endpoint hands each call to a queue. Without it nothing extra happens per step.

Token streaming: a caller may also pass `on_delta`. Only the **output step** streams — the
model step whose output *is* the workflow's output (`output: steps.ID.output`), so the
pieces a client receives add up to exactly the answer. Every other step runs to completion
as usual; a workflow whose output is not one model step's (a transform joining several)
streams no tokens. The output step's backend call is made with `on_delta`, and each piece
goes to `on_delta(step_id, text)` as it arrives; a cache hit passes the cached text as one
piece. Once a piece went out, a failed attempt is not retried (the caller already has part
of an answer a retry could not take back). The moment of the first piece is the
invocation's time to first token (`Execution.first_token_ms`).

The step cache: a step with `cache` enabled is looked up by its key before it runs and its
output stored after, unless the call asked to bypass the cache (`cache=CacheMode.BYPASS`,
from the caller's `Cache-Control: no-cache`; `plnt.api.headers`): then every step runs
and nothing is read or written, and the trace says `bypass` for each such step. A tool
loop is cached only when every tool it may call is idempotent (a hit skips them), and a
step that a fallback backend answered is not stored, so the primary's entry never holds
the fallback's answer.

Resuming: `run(..., completed={ID: output})` seeds the DAG with the outputs of steps an
earlier attempt of the same invocation finished (a durable invocation retried on another
replica, `completedSteps` in the invoke envelope): those steps are not run again, are not
reported to `on_step`, and appear in the trace with `resumed: true`. A step id the workflow
does not have is an `InvalidRequest`. `checkpoint` (`plnt.runner.checkpointing`) carries the
rest of what an earlier attempt did — which completed steps were skipped, the `forEach`
elements and tool-loop turns and calls of steps it began — and reports the same as this
attempt goes; those elements and turns are not run again.

Usage: the tokens of each model call made by this invocation are summed
(`Execution.usage`; `plnt.runner.executions` says how). It stays None when any call's
usage is unknown, or no call was made (every model step hit the cache, or every one that
calls a model was resumed) — never estimated.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from plnt.api.headers import CacheMode, StepCacheOutcome
from plnt.runner import (
    attempting,
    backends,
    calling,
    checkpointing,
    deadlines,
    errors,
    executions,
    mapping,
    metrics,
    resolving,
    settings,
    step_cache,
    subworkflows,
)
from plnt.workflowspec import documents, jsonschemas, model, templating

# The names the rest of the runner and its tests know this module by.
StepTrace = executions.StepTrace
Execution = executions.Execution
StepListener = executions.StepListener
DeltaListener = executions.DeltaListener
union_ms = executions.union_ms
model_for = resolving.model_for
output_step = resolving.output_step
require_models = resolving.require_models
MAX_ITEMS = mapping.MAX_ITEMS

AnyStep = model.AnyStep
_REQUIRED = re.compile(r"^'(.+)' is a required property$")


class Executor:
    """Runs one compiled workflow against one backend, sharing one step cache."""

    def __init__(
        self,
        workflow: model.Workflow,
        compiled: templating.CompiledWorkflow,
        *,
        backend: backends.Backend,
        backend_config: settings.BackendConfig,
        session: aiohttp.ClientSession,
        cache: step_cache.StepCache,
        metrics: metrics.RunnerMetrics,
        may_retry: Callable[[], bool] | None = None,
        library: subworkflows.Library = subworkflows.EMPTY,
    ) -> None:
        self.workflow = workflow
        self._may_retry = may_retry
        self._compiled = compiled
        self._backend_config = backend_config
        self.cache = cache
        self._metrics = metrics
        require_models(workflow, backend_config)
        self.output_step = output_step(workflow)
        # One executor per called workflow, built (and its models checked) at start-up.
        called: dict[str, Executor] = {}
        for _, call in workflow.calls():
            if call.digest not in called:
                called_workflow, compiled_called = library.called(call)
                called[call.digest] = Executor(
                    called_workflow,
                    compiled_called,
                    backend=backend,
                    backend_config=backend_config,
                    session=session,
                    cache=cache,
                    metrics=metrics,
                    may_retry=may_retry,  # the same backend, so the same retry budget
                    library=library,
                )
        self._calls = calling.StepCalls(
            workflow,
            tool_templates=compiled.tools,
            backend=backend,
            session=session,
            metrics=metrics,
            called=called,
            output_step=self.output_step,
        )
        self._definitions = {
            step.id: step.model_dump(mode="json", by_alias=True) for step in workflow.steps
        }
        # A tool's definition decides what a loop does: it is part of the step's cache key.
        # A loop is cached only when every tool it may call is idempotent: a hit skips them.
        self._cacheable: dict[str, bool] = {}
        for step in workflow.steps:
            tools = self.step_tools(step)
            if tools:
                self._definitions[step.id]["toolDefinitions"] = [
                    tool.model_dump(mode="json", by_alias=True) for tool in tools
                ]
            self._cacheable[step.id] = step.cache and all(tool.idempotent for tool in tools)
        self._kinds = {step.id: step.kind for step in workflow.steps}
        self._inputs = documents.inputs_validator(workflow)

    def step_tools(self, step: AnyStep) -> list[model.Tool]:
        """The tools a model step may call, in its order (none for other steps)."""
        return self._calls.tools(step)

    def validate_inputs(self, inputs: Any) -> dict[str, Any]:
        """Inputs checked against the schema, with top-level property defaults filled in."""
        if not isinstance(inputs, dict):
            raise errors.InvalidInputs([errors.InputProblem("$", "inputs must be a JSON object")])
        problems = []
        for error in documents.input_errors(self._inputs, inputs):
            path = jsonschemas.json_path(error.absolute_path)
            missing = _REQUIRED.match(error.message)
            if error.validator == "required" and missing:
                path += f".{missing.group(1)}"
            problems.append(errors.InputProblem(path, error.message))
        if problems:
            raise errors.InvalidInputs(sorted(problems, key=lambda problem: problem.path))
        filled = dict(inputs)
        properties = self.workflow.inputs.get("properties", {})
        if isinstance(properties, dict):
            for name, schema in properties.items():
                if name not in filled and isinstance(schema, dict) and "default" in schema:
                    filled[name] = schema["default"]
        return filled

    def check_completed(self, completed: Mapping[str, Any]) -> None:
        """`InvalidRequest` when `completed` names a step the workflow does not have."""
        known = {step.id for step in self.workflow.steps}
        unknown = sorted(set(completed) - known)
        if unknown:
            raise errors.InvalidRequest(
                f"completedSteps names steps the workflow does not have: {', '.join(unknown)}"
            )

    async def run(
        self,
        inputs: dict[str, Any],
        *,
        on_step: StepListener | None = None,
        on_delta: DeltaListener | None = None,
        completed: Mapping[str, Any] | None = None,
        cache_mode: CacheMode = CacheMode.USE,
        checkpoint: checkpointing.Checkpoint | None = None,
    ) -> Execution:
        """Execute the DAG over validated inputs and evaluate the output expression.

        `on_step(trace, error)` is called as each step finishes, `on_delta(step, text)` for
        each piece of the output step's reply; the steps in `completed` are taken as
        finished with those outputs; `cache_mode` says whether the step cache may be used
        (see the module docstring).
        """
        invocation = executions.Invocation(
            inputs=inputs,
            started=time.perf_counter(),
            on_step=on_step,
            on_delta=on_delta,
            cache_mode=cache_mode,
            checkpoint=checkpoint or checkpointing.NONE,
        )
        if completed:
            self.check_completed(completed)
        loop = asyncio.get_running_loop()
        done = {step.id: loop.create_future() for step in self.workflow.steps}
        seeded = set(completed or {})
        for step_id, output in (completed or {}).items():
            invocation.outputs[step_id] = output
            invocation.traces[step_id] = StepTrace(
                id=step_id, kind=self._kinds[step_id], resumed=True, output=output
            )
            if (why := invocation.checkpoint.skipped(step_id)) is not None:
                invocation.traces[step_id].skipped = why
                invocation.skipped.add(step_id)
            done[step_id].set_result(None)
        try:
            async with asyncio.TaskGroup() as group:
                for step in self.workflow.steps:
                    if step.id not in seeded:
                        group.create_task(self._run_step(step, invocation, done))
        except ExceptionGroup as group:
            first = executions.first_failure(group)
            if first is None:
                raise
            raise first  # noqa: B904 - its own cause is chained already
        context = templating.context(inputs, invocation.outputs, invocation.skipped)
        try:
            output = self._compiled.output.evaluate(context)
        except templating.RenderError as error:
            raise errors.OutputFailed(f"output expression failed: {error}") from error
        total_ms = invocation.offset_ms(time.perf_counter())
        return Execution(
            output=output,
            trace=[invocation.traces[step.id] for step in self.workflow.steps],
            cache_hits=invocation.hits,
            cache_misses=invocation.misses,
            total_ms=total_ms,
            backend_ms=union_ms(invocation.intervals),
            usage=invocation.total_usage(),
            first_token_ms=invocation.first_token_ms,
            cache_bypassed=invocation.bypassed,
            fallback=invocation.fallback,
            intervals=invocation.intervals,
            calls_without_usage=invocation.calls_without_usage,
        )

    async def _run_step(
        self,
        step: AnyStep,
        invocation: executions.Invocation,
        done: dict[str, asyncio.Future[None]],
    ) -> None:
        for need in step.needs:
            await done[need]
        deadlines.current().deadline.check(f"step {step.id}")  # nobody waits for it any more
        trace = StepTrace(id=step.id, kind=step.kind)
        invocation.traces[step.id] = trace
        began = time.perf_counter()
        trace.started_ms = invocation.offset_ms(began)
        try:
            await self._step_body(step, invocation, trace, began)
        except errors.RunnerError as error:
            if invocation.on_step is not None:
                trace.finished_ms = invocation.offset_ms(time.perf_counter())
                invocation.on_step(trace, error)
            raise
        if invocation.on_step is not None:
            invocation.on_step(trace, None)
        done[step.id].set_result(None)

    async def _step_body(
        self, step: AnyStep, invocation: executions.Invocation, trace: StepTrace, began: float
    ) -> None:
        visible = self._compiled.ancestors[step.id]
        outputs = {key: value for key, value in invocation.outputs.items() if key in visible}
        context = templating.context(invocation.inputs, outputs, invocation.skipped & visible)
        templates = self._compiled.steps[step.id]
        if templates.when is not None:
            try:
                go = templates.when.evaluate(context)
            except templating.RenderError as error:
                raise errors.StepFailed(step.id, f"`when` failed: {error}") from error
            if not go:
                trace.skipped = f"`when` is {go!r}: {step.when}"
                invocation.skipped.add(step.id)
                invocation.outputs[step.id] = None
                trace.finished_ms = invocation.offset_ms(time.perf_counter())
                return
        if templates.for_each is not None:

            async def produce(scoped: dict[str, Any]) -> Any:
                return await self._produce(step, scoped, invocation, trace)

            value: Any = await mapping.map_items(
                step,
                templates.for_each,
                context,
                invocation=invocation,
                trace=trace,
                produce=produce,
            )
        else:
            value = await self._produce(step, context, invocation, trace)
        invocation.outputs[step.id] = value
        trace.output = value
        finished = time.perf_counter()
        trace.finished_ms = invocation.offset_ms(finished)
        self._metrics.step_latency.labels(step.id, step.kind, str(trace.cache)).observe(
            finished - began
        )

    async def _produce(
        self,
        step: AnyStep,
        context: dict[str, Any],
        invocation: executions.Invocation,
        trace: StepTrace,
    ) -> Any:
        """One output of the step over `context`: from the step cache, or by running it."""
        try:
            resolved = resolving.resolve(
                step, self._compiled.steps[step.id], context, config=self._backend_config
            )
        except templating.RenderError as error:
            raise errors.StepFailed(step.id, f"template failed: {error}") from error
        key = None
        value: Any = None
        cacheable = self._cacheable[step.id]
        if cacheable and invocation.cache_mode is CacheMode.BYPASS:
            trace.cache = StepCacheOutcome.BYPASS
            invocation.bypassed += 1
        elif cacheable:
            key = step_cache.cache_key(
                step=self._definitions[step.id],
                resolved=resolved,
                backend=self._backend_config.identity(),
                model=resolved.get("model") if isinstance(resolved, dict) else None,
            )
            hit, value = self.cache.get(key)
            trace.cache = StepCacheOutcome.HIT if hit else StepCacheOutcome.MISS
            if hit:
                invocation.hits += 1
                self._metrics.cache_hits.inc()
                if step.id == self.output_step and isinstance(value, str):
                    invocation.delta(step.id, value)
                return value
            invocation.misses += 1
            self._metrics.cache_misses.inc()
        fallback_replies = invocation.fallback_replies

        async def call() -> Any:
            return await self._calls.call(step, resolved, invocation, trace)

        value = await attempting.attempts(
            step,
            call,
            invocation=invocation,
            trace=trace,
            streams=step.id == self.output_step,
            may_retry=self._may_retry,
        )
        if key is not None and invocation.fallback_replies == fallback_replies:
            self.cache.put(key, value)
        return value
