"""Executing a workflow's DAG: concurrency, timeouts, retries, the step cache and the trace.

Every step runs as a task in one `asyncio.TaskGroup` and waits only for the steps it
`needs`, so independent steps overlap. A step sees the outputs of its ancestors only, which
keeps rendering deterministic however the tasks interleave. Each attempt is bounded by the
step's `timeoutSeconds`; the failures its retry policy names (`retry`, or the older
`retries`: backend failures and timeouts) are retried with jittered exponential backoff,
a model step's only while its backend's retry budget has room (docs/reliability.md). When a
step fails for good, the task group cancels the rest and the first failure is raised as a
`plnt.runner.errors.StepFailed` naming the step.

Deadlines: the invocation's deadline (`plnt.runner.deadlines`, from the caller's
`X-Plnt-Timeout-Ms`) is checked before each step starts and bounds each attempt; a step
that would start after it, or an attempt it cuts short, fails the invocation with
`DeadlineExceeded` naming the step (504), and no retry is made that the time left could
not cover.

Control flow: a step whose `when` is false is skipped — its output is None, its dependants
run and see `steps.ID.skipped`, and its trace says why. A `forEach` step runs once per
element of its list, `maxParallel` at once, each element with its own attempts, timeout and
cache entry; its output is the results in order, and a failed element fails the step (the
others cancelled) unless `continueOnError`. Model steps with `responseFormat` are asked for
JSON of the schema and checked (`plnt.runner.structured`); model steps with `tools` run the
tool loop (`plnt.runner.agents`), which reports its turns into the step's trace. A
`kind: workflow` step runs the workflow it calls (`plnt.runner.subworkflows`), whose trace
is nested in the step's.

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
and nothing is read or written, and the trace says `bypass` for each such step.

Model steps: a chat step resolves its messages and calls `Backend.chat`; a completion step
(`mode: completion`) resolves its prompt and calls `Backend.complete`. Either one's
resolved request (with `stop` and `seed` when set) is part of the step's cache key.

Resuming: `run(..., completed={ID: output})` seeds the DAG with the outputs of steps an
earlier attempt of the same invocation finished (a durable invocation retried on another
replica, `completedSteps` in the invoke envelope): those steps are not run again, are not
reported to `on_step`, and appear in the trace with `resumed: true`. A step id the workflow
does not have is an `InvalidRequest`. `checkpoint` (`plnt.runner.checkpointing`) carries the
rest of what an earlier attempt did — which completed steps were skipped, the `forEach`
elements and tool-loop turns and calls of steps it began — and reports the same as this
attempt goes; those elements and turns are not run again.

Usage: the tokens of each model call made by this invocation are summed
(`Execution.usage`), as the backend reported them or, where it streams without them, as
the backend client counted them (`plnt.runner.counting`; the sum is then marked
`counted`). It stays None when any call's usage is unknown, or no call was made (every
model step hit the cache, or every one that calls a model was resumed) — never estimated.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from plnt.api import traces
from plnt.api.headers import CacheMode, StepCacheOutcome
from plnt.api.usage import Usage
from plnt.runner import (
    agents,
    backends,
    checkpointing,
    deadlines,
    errors,
    metrics,
    settings,
    step_cache,
    structured,
    subworkflows,
)
from plnt.workflowspec import documents, model, templating

MAX_HTTP_RESPONSE_BYTES = 10 * 1024 * 1024
MAX_ITEMS = 1024
"""The most elements a `forEach` maps over in one invocation."""
_REQUIRED = re.compile(r"^'(.+)' is a required property$")
AnyStep = model.AnyStep
StepListener = Callable[["StepTrace", "errors.RunnerError | None"], None]
DeltaListener = Callable[[str, str], None]
_DEADLINE_GRACE = 0.05
"""Seconds a step's own bound waits past the deadline, so an inner hop can name itself."""
_OUTPUT_OF_STEP = re.compile(r"^\s*steps\.([A-Za-z_][A-Za-z0-9_]*)\.output\s*$")


@dataclass
class StepTrace:
    """What happened to one step in one invocation."""

    id: str
    kind: str
    started_ms: float = 0.0
    finished_ms: float = 0.0
    backend_ms: float = 0.0
    attempts: int = 0
    cache: StepCacheOutcome = StepCacheOutcome.OFF
    resumed: bool = False
    """Finished by an earlier attempt of the invocation (`completed`): not run here."""
    output: Any = field(default=None, repr=False, compare=False)
    """The step's output once it finished (for step lines that carry it; not in `to_json`)."""
    skipped: str | None = None
    """Why the step did not run (its `when` was false); None when it ran."""
    turns: list[agents.TurnTrace] | None = None
    """A tool loop's turns, over every attempt (None: the step has no tools)."""
    items: int | None = None
    """How many elements a `forEach` step mapped over (None: it has no `forEach`)."""
    failed_items: list[traces.FailedItem] = field(default_factory=list)
    """The elements that failed in a `continueOnError` map: `{index, error}`."""
    steps: list[StepTrace] | None = None
    """A workflow step's called workflow's trace (None: the step calls none)."""

    def to_json(self) -> traces.StepEntry:
        """The trace entry as the API returns it (`plnt.api.traces`)."""
        entry: traces.StepEntry = {
            "id": self.id,
            "kind": self.kind,
            "startedMs": round(self.started_ms, 3),
            "finishedMs": round(self.finished_ms, 3),
            "durationMs": round(self.finished_ms - self.started_ms, 3),
            "backendMs": round(self.backend_ms, 3),
            "attempts": self.attempts,
            "cache": str(self.cache),
        }
        if self.resumed:
            entry["resumed"] = True
        if self.skipped is not None:
            entry["skipped"] = self.skipped
        if self.turns is not None:
            entry["turns"] = [turn.to_json() for turn in self.turns]
            calls = [call for turn in self.turns for call in turn.tool_calls]
            entry["toolCalls"] = len(calls)
            entry["invalidToolCalls"] = sum(call.invalid for call in calls)
        if self.items is not None:
            entry["items"] = self.items
            entry["failedItems"] = list(self.failed_items)
        if self.steps is not None:
            entry["steps"] = [step.to_json() for step in self.steps]
        return entry


@dataclass
class Execution:
    """The result of one invocation."""

    output: Any
    trace: list[StepTrace]
    cache_hits: int
    cache_misses: int
    total_ms: float
    backend_ms: float
    usage: Usage | None = None
    first_token_ms: float | None = None
    cache_bypassed: int = 0
    """Steps with the cache enabled that ran without it, because the call asked."""
    fallback: str | None = None
    """The fallback backend that answered at least one model call (None: none did)."""
    intervals: list[tuple[float, float]] = field(default_factory=list, repr=False)
    """Every backend and HTTP call's (start, end), in `perf_counter` seconds."""
    calls_without_usage: int = 0
    """Model calls whose tokens are unknown (then `usage` is None)."""

    @property
    def runner_ms(self) -> float:
        """Time not spent waiting on a backend or HTTP target."""
        return max(self.total_ms - self.backend_ms, 0.0)


@dataclass
class _Invocation:
    inputs: dict[str, Any]
    started: float
    outputs: dict[str, Any] = field(default_factory=dict)
    traces: dict[str, StepTrace] = field(default_factory=dict)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    bypassed: int = 0
    cache_mode: CacheMode = CacheMode.USE
    on_step: StepListener | None = None
    on_delta: DeltaListener | None = None
    usage: Usage | None = None
    calls_without_usage: int = 0
    first_token_ms: float | None = None
    skipped: set[str] = field(default_factory=set)
    """Steps whose `when` was false: their dependants see `steps.ID.skipped`."""
    checkpoint: checkpointing.Checkpoint = checkpointing.NONE
    fallback: str | None = None
    fallback_replies: int = 0
    """Model calls the fallback answered: a step that used one is not cached, so the
    primary's cache entry never holds the fallback's answer."""

    def offset_ms(self, moment: float) -> float:
        return (moment - self.started) * 1000.0

    def count(self, reply: backends.Reply) -> None:
        """Add one model call's reported tokens (or note that it reported none)."""
        if reply.usage is None:
            self.calls_without_usage += 1
        else:
            self.usage = reply.usage if self.usage is None else self.usage + reply.usage

    def delta(self, step: str, piece: str) -> None:
        """Pass one piece of the output step on; the first one times the first token."""
        if self.on_delta is None or not piece:
            return
        if self.first_token_ms is None:
            self.first_token_ms = self.offset_ms(time.perf_counter())
        self.on_delta(step, piece)

    def total_usage(self) -> Usage | None:
        return None if self.calls_without_usage else self.usage


def union_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length (ms) covered by possibly overlapping (start, end) intervals in seconds."""
    total = 0.0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total * 1000.0


def model_for(step: model.ModelStep, config: settings.BackendConfig) -> str | None:
    """The model a step calls: its own, else the backend's, else `echo` on the echo backend."""
    if step.model:
        return step.model
    if config.model:
        return config.model
    return "echo" if config.type == "echo" else None


def output_step(workflow: model.Workflow) -> str | None:
    """The model step whose output is the workflow's output, if there is one whose text
    can stream: not a tool loop (its turns are not the answer), not structured output (the
    output is parsed JSON, not the text), not a map (the output is a list)."""
    match = _OUTPUT_OF_STEP.match(workflow.output)
    if match is None:
        return None
    step = next((s for s in workflow.steps if s.id == match.group(1)), None)
    if not isinstance(step, model.ModelStep):
        return None
    if step.tools or step.response_format is not None or step.for_each is not None:
        return None
    return step.id


def require_models(workflow: model.Workflow, config: settings.BackendConfig) -> None:
    """Raise `BackendConfigError` when a model step would have no model to call."""
    missing = [
        step.id
        for step in workflow.steps
        if isinstance(step, model.ModelStep) and model_for(step, config) is None
    ]
    if missing:
        raise settings.BackendConfigError(
            f"steps {missing} name no model and the backend configures none (set `model`)"
        )


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
        self._backend = backend
        self._backend_config = backend_config
        self._session = session
        self.cache = cache
        self._metrics = metrics
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
        require_models(workflow, backend_config)
        self.output_step = output_step(workflow)
        # One executor per called workflow, built (and its models checked) at start-up.
        self._called: dict[str, Executor] = {}
        for _, call in workflow.calls():
            if call.digest not in self._called:
                called, compiled_called = library.called(call)
                self._called[call.digest] = Executor(
                    called,
                    compiled_called,
                    backend=backend,
                    backend_config=backend_config,
                    session=session,
                    cache=cache,
                    metrics=metrics,
                    library=library,
                )

    def step_tools(self, step: AnyStep) -> list[model.Tool]:
        """The tools a model step may call, in its order (none for other steps)."""
        if not isinstance(step, model.ModelStep) or not step.tools:
            return []
        return [self.workflow.tool(name) for name in step.tools]

    def validate_inputs(self, inputs: Any) -> dict[str, Any]:
        """Inputs checked against the schema, with top-level property defaults filled in."""
        if not isinstance(inputs, dict):
            raise errors.InvalidInputs([errors.InputProblem("$", "inputs must be a JSON object")])
        problems = []
        for error in documents.validate_inputs(self.workflow, inputs):
            path = "$" + "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
            )
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
        invocation = _Invocation(
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
            failures = _leaves(group)
            first = next((e for e in failures if isinstance(e, errors.RunnerError)), None)
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
        self, step: AnyStep, invocation: _Invocation, done: dict[str, asyncio.Future[None]]
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
        self, step: AnyStep, invocation: _Invocation, trace: StepTrace, began: float
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
            value = await self._map(step, context, invocation, trace)
        else:
            value = await self._produce(step, context, invocation, trace)
        invocation.outputs[step.id] = value
        trace.output = value
        finished = time.perf_counter()
        trace.finished_ms = invocation.offset_ms(finished)
        self._metrics.step_latency.labels(step.id, step.kind, str(trace.cache)).observe(
            finished - began
        )

    async def _map(
        self, step: AnyStep, context: dict[str, Any], invocation: _Invocation, trace: StepTrace
    ) -> list[Any]:
        """Run the step once per element of its `forEach`, `maxParallel` at once; the
        results in the elements' order. A failed element fails the step (the others are
        cancelled) unless `continueOnError`, which leaves none in its place."""
        expression = self._compiled.steps[step.id].for_each
        assert expression is not None
        try:
            items = expression.evaluate(context)
        except templating.RenderError as error:
            raise errors.StepFailed(step.id, f"`forEach` failed: {error}") from error
        if not isinstance(items, list | tuple):
            raise errors.StepFailed(
                step.id, f"`forEach` gave {type(items).__name__}, not a list: {step.for_each}"
            )
        if len(items) > MAX_ITEMS:
            raise errors.StepFailed(
                step.id, f"`forEach` gave {len(items)} elements, more than {MAX_ITEMS}"
            )
        trace.items = len(items)
        results: list[Any] = [None] * len(items)
        limit = asyncio.Semaphore(step.max_parallel)

        checkpoint = invocation.checkpoint
        trace.failed_items.extend(checkpoint.failed_items(step.id))
        failed_before = {entry["index"] for entry in trace.failed_items}

        async def one(index: int, item: Any) -> None:
            finished, results[index] = checkpoint.item(step.id, index)
            if finished or index in failed_before:
                return  # an earlier attempt of the invocation did it
            async with limit:
                checkpointing.SCOPE.set(str(index))  # this element's task only
                scoped = {**context, "item": item, "index": index}
                try:
                    results[index] = await self._produce(step, scoped, invocation, trace)
                except errors.StepFailed as error:
                    if not step.continue_on_error:
                        error.args = (f"{error.args[0]} (forEach element {index})",)
                        raise
                    failed: traces.FailedItem = {"index": index, "error": str(error)}
                    trace.failed_items.append(failed)
                    checkpoint.item_failed(step.id, failed)
                    return
                checkpoint.item_done(step.id, index, results[index])

        try:
            async with asyncio.TaskGroup() as group:
                for index, item in enumerate(items):
                    group.create_task(one(index, item))
        except ExceptionGroup as group:
            first = next((e for e in _leaves(group) if isinstance(e, errors.RunnerError)), None)
            if first is None:
                raise
            raise first  # noqa: B904 - its own cause is chained already
        trace.failed_items.sort(key=lambda entry: entry["index"])
        return results

    async def _produce(
        self, step: AnyStep, context: dict[str, Any], invocation: _Invocation, trace: StepTrace
    ) -> Any:
        """One output of the step over `context`: from the step cache, or by running it."""
        try:
            resolved = self._resolve(step, context)
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
        value = await self._attempt(step, resolved, invocation, trace)
        if key is not None and invocation.fallback_replies == fallback_replies:
            self.cache.put(key, value)
        return value

    def _resolve(self, step: AnyStep, context: dict[str, Any]) -> Any:
        templates = self._compiled.steps[step.id]
        if isinstance(step, model.ModelStep):
            resolved: dict[str, Any] = {"model": model_for(step, self._backend_config)}
            if templates.prompt is not None:  # a completion step: the text to continue
                resolved["prompt"] = templates.prompt.render(context)
            else:
                resolved["messages"] = [
                    {"role": role, "content": template.render(context)}
                    for role, template in templates.messages
                ]
            resolved |= {"temperature": step.temperature, "max_tokens": step.max_tokens}
            # Only when set, so the cache keys of steps that set neither stay as they were.
            resolved |= {
                key: value
                for key, value in (("stop", step.stop), ("seed", step.seed))
                if value is not None
            }
            return resolved
        if isinstance(step, model.HttpStep):
            assert templates.url is not None
            return {
                "method": step.method,
                "url": templates.url.render(context),
                "headers": {name: t.render(context) for name, t in templates.headers.items()},
                "body": templates.body.render(context) if templates.body else None,
            }
        if isinstance(step, model.WorkflowStep):
            return subworkflows.resolve(step, templates, context)
        if templates.template is not None:
            return {"value": templates.template.render(context)}
        assert templates.expression is not None
        return {"value": templates.expression.evaluate(context)}

    async def _attempt(
        self, step: AnyStep, resolved: dict[str, Any], invocation: _Invocation, trace: StepTrace
    ) -> Any:
        """Call the step, each attempt bounded by `timeoutSeconds` and the call's deadline,
        retried as its `retry` policy says (which failures, how many attempts, how long
        apart, with jitter).

        This loop is the one layer that retries a backend call (the backend client, the API
        server and the Invocation's activity do not): a model step's retry is made only
        when the backend's retry budget has room (`may_retry`), and never when the time
        left would not cover the backoff. A deadline that runs out is `DeadlineExceeded`
        naming the step, never retried.
        """
        policy = step.retry_policy()
        delay = policy.backoff_seconds
        failure: errors.StepFailed | None = None
        deadline = deadlines.current().deadline
        for attempt in range(policy.attempts):
            if invocation.first_token_ms is not None and step.id == self.output_step:
                break  # part of the answer is out already: a retry cannot take it back
            trace.attempts = max(trace.attempts, attempt + 1)
            bound = deadline.bound(step.timeout_seconds)
            # When the deadline binds, the guarded backend call ends at it and names the
            # backend; this bound, a moment later, catches what else the step waits on.
            try:
                async with asyncio.timeout(
                    bound if bound >= step.timeout_seconds else bound + _DEADLINE_GRACE
                ):
                    return await self._call(step, resolved, invocation, trace)
            except TimeoutError as error:
                if bound < step.timeout_seconds and deadline.expired():
                    raise errors.DeadlineExceeded(
                        f"step {step.id}", f"attempt {attempt + 1} outlived the time left"
                    ) from error
                failure, cause = (
                    errors.StepTimedOut(
                        step.id,
                        f"timed out after {step.timeout_seconds:g}s (attempt {attempt + 1})",
                    ),
                    "timeout",
                )
                failure.__cause__ = error
            except backends.BackendTimeout as error:
                failure, cause = errors.StepTimedOut(step.id, str(error)), "timeout"
                failure.__cause__ = error
            except backends.BackendError as error:
                failure, cause = errors.StepBackendFailed(step.id, str(error)), "backend"
                failure.__cause__ = error
            except errors.StepInvalidOutput as error:
                failure, cause = error, "output"
            if cause not in policy.retry_on:
                raise failure
            if attempt + 1 >= policy.attempts or invocation.first_token_ms is not None:
                continue
            pause = _jittered(min(delay, policy.max_backoff_seconds))
            left = deadline.remaining()
            if left is not None and left <= pause:
                raise failure  # no time for another attempt
            if not self._retry_allowed(step, cause):
                raise failure  # the backend's retry budget is spent: the error passes through
            await asyncio.sleep(pause)
            delay *= policy.backoff_factor
        assert failure is not None
        raise failure

    def _retry_allowed(self, step: AnyStep, cause: str) -> bool:
        """Whether a model step may call its backend again: only within the budget. Other
        steps (and a model's unusable output, a reply already paid for) are not counted."""
        if not isinstance(step, model.ModelStep) or cause == "output" or self._may_retry is None:
            return True
        return self._may_retry()

    async def _call(
        self, step: AnyStep, resolved: dict[str, Any], invocation: _Invocation, trace: StepTrace
    ) -> Any:
        if isinstance(step, model.TransformStep):
            return resolved["value"]
        if isinstance(step, model.ModelStep) and step.tools:
            return await self._loop(step, resolved, invocation, trace)
        if isinstance(step, model.WorkflowStep):
            return await self._call_workflow(step, resolved, invocation, trace)
        began = time.perf_counter()
        outcome = "error"
        try:
            if isinstance(step, model.ModelStep):
                streams = invocation.on_delta is not None and step.id == self.output_step
                on_delta = (lambda piece: invocation.delta(step.id, piece)) if streams else None
                reply = await self._generate(step, resolved, on_delta)
                if reply.served_by is not None:
                    invocation.fallback = reply.served_by
                    invocation.fallback_replies += 1
                invocation.count(reply)
                self._metrics.count_tokens(reply.usage)
                outcome = "ok"
                if step.response_format is None:
                    return reply.content
                value = structured.parse_json(step.id, reply.content)
                return structured.check(step.id, value, step.response_format)
            answer = await self._http(step, resolved)
            outcome = "ok"
            return answer
        finally:
            ended = time.perf_counter()
            invocation.intervals.append((began, ended))
            trace.backend_ms += (ended - began) * 1000.0
            self._metrics.backend_latency.labels(step.kind, outcome).observe(ended - began)

    async def _loop(
        self,
        step: model.ModelStep,
        resolved: dict[str, Any],
        invocation: _Invocation,
        trace: StepTrace,
    ) -> Any:
        """A step with tools: its tool loop (`plnt.runner.agents`), turns kept in the trace
        across attempts."""

        def count(reply: backends.Reply) -> None:
            invocation.count(reply)
            self._metrics.count_tokens(reply.usage)

        def interval(began: float, ended: float) -> None:
            invocation.intervals.append((began, ended))
            trace.backend_ms += (ended - began) * 1000.0

        loop = agents.ToolLoop(
            step,
            tools=self.step_tools(step),
            templates=self._compiled.tools,
            backend=self._backend,
            session=self._session,
            inputs=invocation.inputs,
            hooks=agents.Hooks(offset_ms=invocation.offset_ms, count=count, interval=interval),
            saved=invocation.checkpoint.loop(step.id),
            report=invocation.checkpoint.reporter(step.id),
        )
        if trace.turns is None:
            trace.turns = []
        try:
            return await loop.run(resolved, _options(resolved))
        finally:
            trace.turns.extend(loop.turns)

    async def _call_workflow(
        self,
        step: model.WorkflowStep,
        resolved: dict[str, Any],
        invocation: _Invocation,
        trace: StepTrace,
    ) -> Any:
        """A workflow step: the called workflow's run, its calls and tokens counted here."""
        execution = await subworkflows.call(
            self._called[step.digest], step, resolved, cache_mode=invocation.cache_mode
        )
        invocation.intervals.extend(execution.intervals)
        trace.backend_ms += execution.backend_ms
        invocation.calls_without_usage += execution.calls_without_usage
        if execution.usage is not None:
            usage = execution.usage
            invocation.usage = usage if invocation.usage is None else invocation.usage + usage
        invocation.hits += execution.cache_hits
        invocation.misses += execution.cache_misses
        trace.steps = execution.trace
        return execution.output

    async def _generate(
        self,
        step: model.ModelStep,
        resolved: dict[str, Any],
        on_delta: backends.DeltaListener | None,
    ) -> backends.Reply:
        """One model call: a text completion when the step resolved a prompt, else a chat;
        held to the step's `responseFormat` by a grammar or OpenAI's `response_format`."""
        options = _options(resolved)
        form = step.response_format
        extra: dict[str, Any] = {}
        if "prompt" in resolved:
            if form is not None:
                extra["grammar"] = structured.completion_grammar(form)
            completion = backends.CompletionRequest(
                prompt=resolved["prompt"], extra=extra, **options
            )
            return await self._backend.complete(completion, on_delta=on_delta)
        if form is not None:
            extra["response_format"] = structured.chat_response_format(form)
        chat = backends.ChatRequest(messages=resolved["messages"], extra=extra, **options)
        return await self._backend.chat(chat, on_delta=on_delta)

    async def _http(self, step: model.HttpStep, resolved: dict[str, Any]) -> Any:
        url = resolved["url"]
        if not url.startswith(("http://", "https://")):
            raise errors.StepFailed(step.id, f"url {url!r} is not an http(s) URL")
        try:
            async with self._session.request(
                resolved["method"],
                url,
                headers=resolved["headers"],
                data=resolved["body"].encode() if resolved["body"] is not None else None,
            ) as response:
                raw = await _read_capped(response, step, url)
                if response.status >= 400:
                    raise backends.BackendUnavailable(
                        f"{resolved['method']} {url} answered {response.status}"
                    )
                is_json = step.response == "json" or (
                    step.response == "auto" and response.content_type.endswith("json")
                )
        except aiohttp.ClientError as error:
            raise backends.BackendUnavailable(
                f"{resolved['method']} {url} failed: {error}"
            ) from error
        text = raw.decode(response.charset or "utf-8", errors="replace")
        if not is_json:
            return text
        try:
            return json.loads(text)
        except ValueError as error:
            raise backends.BackendUnavailable(f"{url} answered invalid JSON") from error


async def _read_capped(response: aiohttp.ClientResponse, step: model.HttpStep, url: str) -> bytes:
    """The whole answer body, or StepFailed once it passes MAX_HTTP_RESPONSE_BYTES.

    One `StreamReader.read(n)` returns what one chunk holds (about 64 KiB), not n bytes, so
    a larger JSON answer would be cut and then fail to parse; this reads to the end, with a
    bound so a service answering without end cannot fill the runner's memory.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_HTTP_RESPONSE_BYTES:
            raise errors.StepBackendFailed(
                step.id,
                f"{url} answered more than {MAX_HTTP_RESPONSE_BYTES} bytes, "
                "the most an http step reads",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _jittered(seconds: float) -> float:
    """A backoff with "equal jitter": half fixed, half random, so callers that failed
    together do not all come back together."""
    return seconds / 2 + random.uniform(0, seconds / 2)  # jitter, not a secret


def _options(resolved: dict[str, Any]) -> dict[str, Any]:
    """The sampling options of a resolved model step, as the backend requests take them."""
    return {
        "model": resolved["model"],
        "temperature": resolved["temperature"],
        "max_tokens": resolved["max_tokens"],
        "stop": resolved.get("stop"),
        "seed": resolved.get("seed"),
    }


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            found += _leaves(error)
        else:
            found.append(error)
    return found
