"""One call of one step, by its kind: a model (a chat or a text completion, held to its
`responseFormat`, or its tool loop), an http target, a transform, a called workflow.

This is where a step meets its backend: each call's time goes into the invocation's
backend intervals (Server-Timing's "backend time") and the step's `backendMs`, a model
call's tokens into the invocation's usage, and a reply the fallback backend produced into
the invocation's `fallback`. One call is one attempt: timeouts, retries and the deadline
are the caller's (`plnt.runner.attempting`), the step cache is the executor's.

Model steps: a chat step calls `Backend.chat` with its messages, a completion step
(`mode: completion`) `Backend.complete` with its prompt; with `responseFormat` the reply is
parsed and checked against the schema (`plnt.runner.structured`), asked for by a grammar
(completions) or OpenAI's `response_format` (chat). Only the output step streams
(`on_delta`). A step with `tools` runs its tool loop (`plnt.runner.agents`), its turns kept
in the step's trace across attempts.

Http steps read the whole answer, up to `MAX_HTTP_RESPONSE_BYTES`; an error status, a
refused connection or invalid JSON is a backend failure (`BackendUnavailable`), which the
step's retry policy may retry.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from typing import Any

import aiohttp

from plnt.runner import (
    agents,
    backends,
    errors,
    executions,
    metrics,
    resolving,
    structured,
    subworkflows,
)
from plnt.workflowspec import model, templating

MAX_HTTP_RESPONSE_BYTES = 10 * 1024 * 1024
"""The most an http step reads of an answer."""


class StepCalls:
    """The calls of one workflow's steps, against one backend and HTTP session."""

    def __init__(
        self,
        workflow: model.Workflow,
        *,
        tool_templates: dict[str, templating.ToolTemplates],
        backend: backends.Backend,
        session: aiohttp.ClientSession,
        metrics: metrics.RunnerMetrics,
        called: Mapping[str, subworkflows.Called],
        output_step: str | None,
    ) -> None:
        self._workflow = workflow
        self._tool_templates = tool_templates
        self._backend = backend
        self._session = session
        self._metrics = metrics
        self._called = called
        self._output_step = output_step
        # Made once here, not per call: the request fields, grammars and validators.
        self._schemas = {
            step.id: structured.Schemas.of(step, self.tools(step))
            for step in workflow.steps
            if isinstance(step, model.ModelStep)
        }

    def tools(self, step: model.AnyStep) -> list[model.Tool]:
        """The tools a model step may call, in its order (none for other steps)."""
        if not isinstance(step, model.ModelStep) or not step.tools:
            return []
        return [self._workflow.tool(name) for name in step.tools]

    async def call(
        self,
        step: model.AnyStep,
        resolved: dict[str, Any],
        invocation: executions.Invocation,
        trace: executions.StepTrace,
    ) -> Any:
        """The step's output from one call over its resolved request."""
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
                reply = await self._model(step, resolved, invocation)
                outcome = "ok"  # the backend answered, whatever the answer is worth
                return self._schemas[step.id].parse(reply.content)
            answer = await self._http(step, resolved)
            outcome = "ok"
            return answer
        finally:
            ended = time.perf_counter()
            invocation.waited(began, ended, trace)
            self._metrics.backend_latency.labels(step.kind, outcome).observe(ended - began)

    async def _model(
        self, step: model.ModelStep, resolved: dict[str, Any], invocation: executions.Invocation
    ) -> backends.Reply:
        """One model call, its tokens counted and a fallback's answer noted."""
        streams = invocation.on_delta is not None and step.id == self._output_step
        on_delta = (lambda piece: invocation.delta(step.id, piece)) if streams else None
        reply = await self._generate(step, resolved, on_delta)
        self._replied(invocation, reply)
        return reply

    def _replied(self, invocation: executions.Invocation, reply: backends.Reply) -> None:
        """A model call answered: its tokens counted, a fallback's answer noted (the step is
        then not cached), whether a plain model step or a tool loop's turn made it."""
        invocation.served(reply)
        invocation.count(reply)
        self._metrics.count_tokens(reply.usage)

    async def _loop(
        self,
        step: model.ModelStep,
        resolved: dict[str, Any],
        invocation: executions.Invocation,
        trace: executions.StepTrace,
    ) -> Any:
        """A step with tools: its tool loop (`plnt.runner.agents`), turns kept in the trace
        across attempts."""

        def interval(began: float, ended: float) -> None:
            invocation.waited(began, ended, trace)

        loop = agents.ToolLoop(
            step,
            tools=self.tools(step),
            schemas=self._schemas[step.id],
            templates=self._tool_templates,
            backend=self._backend,
            session=self._session,
            inputs=invocation.inputs,
            hooks=agents.Hooks(
                offset_ms=invocation.offset_ms,
                count=functools.partial(self._replied, invocation),
                interval=interval,
            ),
            saved=invocation.checkpoint.loop(step.id),
            report=invocation.checkpoint.reporter(step.id),
        )
        if trace.turns is None:
            trace.turns = []
        try:
            return await loop.run(resolved, resolving.options(resolved))
        finally:
            trace.turns.extend(loop.turns)

    async def _call_workflow(
        self,
        step: model.WorkflowStep,
        resolved: dict[str, Any],
        invocation: executions.Invocation,
        trace: executions.StepTrace,
    ) -> Any:
        """A workflow step: the called workflow's run, its calls and tokens counted here."""
        execution = await subworkflows.call(
            self._called[step.digest], step, resolved, cache_mode=invocation.cache_mode
        )
        invocation.intervals.extend(execution.intervals)
        trace.backend_ms += execution.backend_ms
        invocation.calls_without_usage += execution.calls_without_usage
        if execution.usage is not None:
            invocation.add_usage(execution.usage)
        invocation.hits += execution.cache_hits
        invocation.misses += execution.cache_misses
        if execution.fallback is not None:  # the called workflow's answer is not cached either
            invocation.fell_back(execution.fallback)
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
        options = resolving.options(resolved)
        extra = self._schemas[step.id].extra
        if "prompt" in resolved:
            completion = backends.CompletionRequest(
                prompt=resolved["prompt"], extra=extra, **options
            )
            return await self._backend.complete(completion, on_delta=on_delta)
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
