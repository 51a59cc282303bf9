"""The tool loop of a model step with `tools`: ask the model, run the calls, feed results
back, until it answers or `maxTurns` is reached.

Chat steps use OpenAI's tools API: the tools go out as `tools` (`tool_choice: auto`), the
answer's `tool_calls` are run, and each result goes back as a `tool` message. Completion
steps (a base model, which knows no tools API) are held by a grammar to one action per
turn, either `{"tool": NAME, "arguments": {...}}` with arguments valid for that tool's
schema or `{"answer": ...}`; the runner appends the action and a line
`Result: <JSON>` to the prompt and asks again, so a few-shot prompt written in the same
layout is continued turn after turn.

Every call's arguments are validated against the tool's `parameters` before it runs: an
invalid call (not JSON, an unknown tool, a schema violation) is not run, and its error goes
back to the model as the tool's result, counted in the trace. A tool that fails (its HTTP
target is down, answers an error status, or outlives its timeout) also answers the model
with the error: the model may try again or answer without it. The calls of one turn are
independent of each other and run at once, at most `maxParallelToolCalls` together.

The trace of the step gets one entry per turn (its time and tokens, and the fallback
backend when it answered the turn's model call) and, in it, one per tool call (its time,
and why it failed). Each model call's reply goes to the caller's `count`, so the
invocation's usage sums over turns and an answer the fallback gave is marked as a model
step's is.

A durable invocation resumes a loop where an earlier attempt left it (`saved`, a
`plnt.api.checkpoints.LoopState`): finished turns are not asked again, nor is the turn
whose calls were under way (its reply is reused; the trace marks both `resumed`), results
that came back are reused, and a call of a tool that is not idempotent, sent and never answered,
fails the step (`StepFailed`) rather than being sent twice. The loop reports its state to
`report` when the model asks for calls, before each non-idempotent call is sent, when each
call answers and when a turn ends. The start of a non-idempotent call is known to the
caller once the report reached it: a worker lost in the moment between the report and the
call sees the call as not sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from plnt.api import checkpoints, traces
from plnt.api.usage import Usage
from plnt.runner import backends, errors, structured
from plnt.workflowspec import model, templating

RESULT_PREFIX = "Result: "
"""Begins the line with a tool's result in a completion step's transcript."""
MAX_TOOL_RESULT_BYTES = 1024 * 1024
"""What one tool call may answer at most: its result goes into a prompt."""


@dataclass
class ToolCallTrace:
    """One tool call in one turn."""

    id: str
    name: str
    started_ms: float = 0.0
    finished_ms: float = 0.0
    ok: bool = False
    invalid: bool = False
    """The call was refused before running: not JSON, an unknown tool, or bad arguments."""
    error: str | None = None
    resumed: bool = False
    """Answered in an earlier attempt of the invocation: its result was reused."""
    arguments: str | None = None
    """Their summary for the trace (`traces.arguments_summary`)."""

    @classmethod
    def of(cls, entry: traces.ToolCallEntry) -> ToolCallTrace:
        """A call an earlier attempt finished, from its trace entry."""
        started = float(entry.get("startedMs") or 0.0)
        return cls(
            id=str(entry.get("id")),
            name=str(entry.get("name")),
            started_ms=started,
            finished_ms=started + float(entry.get("durationMs") or 0.0),
            ok=bool(entry.get("ok")),
            invalid=bool(entry.get("invalid")),
            error=entry.get("error"),
            resumed=True,
            arguments=entry.get("arguments"),
        )

    def to_json(self) -> traces.ToolCallEntry:
        entry: traces.ToolCallEntry = {
            "id": self.id,
            "name": self.name,
            "startedMs": round(self.started_ms, 3),
            "durationMs": round(self.finished_ms - self.started_ms, 3),
            "ok": self.ok,
        }
        if self.arguments is not None:
            entry["arguments"] = self.arguments
        if self.invalid:
            entry["invalid"] = True
        if self.error is not None:
            entry["error"] = self.error
        if self.resumed:
            entry["resumed"] = True
        return entry


@dataclass
class TurnTrace:
    """One model call of the loop, and the tool calls it asked for."""

    turn: int
    started_ms: float = 0.0
    finished_ms: float = 0.0
    model_ms: float = 0.0
    usage: Usage | None = None
    final: bool = False
    tool_calls: list[ToolCallTrace] = field(default_factory=list)
    resumed: bool = False
    """The model's reply came from an earlier attempt of the invocation: not asked again.
    The turn either finished there, or ended its calls here (its `model_ms` is then 0)."""
    fallback: str | None = None
    """The fallback backend that answered this turn's model call (None: the backend asked)."""

    @classmethod
    def of(cls, entry: traces.TurnEntry) -> TurnTrace:
        """A turn an earlier attempt finished, from its trace entry."""
        started = float(entry.get("startedMs") or 0.0)
        usage = entry.get("usage")
        return cls(
            turn=int(entry.get("turn") or 0),
            started_ms=started,
            finished_ms=started + float(entry.get("durationMs") or 0.0),
            model_ms=float(entry.get("modelMs") or 0.0),
            usage=Usage.of_answer({"usage": usage}),
            final=bool(entry.get("final")),
            tool_calls=[ToolCallTrace.of(call) for call in entry.get("toolCalls") or []],
            resumed=True,
            fallback=entry.get("fallback"),
        )

    def to_json(self) -> traces.TurnEntry:
        entry: traces.TurnEntry = {
            "turn": self.turn,
            "startedMs": round(self.started_ms, 3),
            "durationMs": round(self.finished_ms - self.started_ms, 3),
            "modelMs": round(self.model_ms, 3),
            "final": self.final,
            "toolCalls": [call.to_json() for call in self.tool_calls],
        }
        if self.usage is not None:
            entry["usage"] = self.usage.to_json()
        if self.resumed:
            entry["resumed"] = True
        if self.fallback is not None:
            entry["fallback"] = self.fallback
        return entry


@dataclass(frozen=True)
class Hooks:
    """What the loop reports to the invocation it runs in."""

    offset_ms: Callable[[float], float]
    """Milliseconds since the invocation began, of a `time.perf_counter()` moment."""
    count: Callable[[backends.Reply], None]
    """Adds a model call's usage to the invocation's, and notes a fallback that answered."""
    interval: Callable[[float, float], None]
    """Notes time spent waiting on a model or a tool (`backend time`)."""


@dataclass
class _Action:
    """A call the model asked for, parsed."""

    id: str
    name: str
    raw: str
    arguments: dict[str, Any] | None = None
    problem: str | None = None


class ToolLoop:
    """Runs one model step's tool loop; `turns` is its trace, filled as it goes."""

    def __init__(
        self,
        step: model.ModelStep,
        *,
        tools: list[model.Tool],
        schemas: structured.Schemas,
        templates: dict[str, templating.ToolTemplates],
        backend: backends.Backend,
        session: aiohttp.ClientSession,
        inputs: dict[str, Any],
        hooks: Hooks,
        saved: checkpoints.LoopState | None = None,
        report: Callable[[checkpoints.LoopState], None] | None = None,
    ) -> None:
        self.step = step
        self._tools = {tool.name: tool for tool in tools}
        self._schemas = schemas
        self._templates = templates
        self._backend = backend
        self._session = session
        self._inputs = inputs
        self._hooks = hooks
        self._limit = asyncio.Semaphore(step.max_parallel_tool_calls)
        self.turns: list[TurnTrace] = []
        self._saved = saved
        self._report = report
        self._state: checkpoints.LoopState = {"turns": []}

    @property
    def tool_calls(self) -> int:
        return sum(len(turn.tool_calls) for turn in self.turns)

    async def run(self, resolved: dict[str, Any], options: dict[str, Any]) -> Any:
        """The final answer: text, or the parsed JSON when the step has `responseFormat`.
        `StepTurnsExhausted` when `maxTurns` turns gave none."""
        saved = self._saved
        if saved is not None:
            self._state["turns"] = list(saved.get("turns") or [])
            self.turns = [TurnTrace.of(entry) for entry in self._state["turns"]]
        if "prompt" in resolved:
            return await self._complete(resolved["prompt"], options)
        messages = list(resolved["messages"])
        if saved is not None and saved.get("messages"):
            messages = list(saved["messages"])
        return await self._chat(messages, options)

    def _publish(self) -> None:
        """Hand the loop's state to whoever keeps it (a durable invocation's caller)."""
        if self._report is not None:
            self._report(self._state)

    def _pending(self) -> checkpoints.PendingTurn | None:
        """The turn an earlier attempt left under way, handed out once."""
        saved, self._saved = self._saved, None
        return saved.get("pending") if saved is not None else None

    def _turn_ended(self, turn: TurnTrace) -> None:
        self._end(turn)
        self._state.pop("pending", None)
        self._state["turns"].append(turn.to_json())
        self._publish()

    async def _model(self, turn: TurnTrace, call: Any) -> backends.Reply:
        began = time.perf_counter()
        try:
            reply: backends.Reply = await call
        finally:
            ended = time.perf_counter()
            self._hooks.interval(began, ended)
            turn.model_ms = (ended - began) * 1000.0
        self._hooks.count(reply)
        turn.usage = reply.usage
        turn.fallback = reply.served_by
        return reply

    def _begin(self) -> TurnTrace:
        turn = TurnTrace(turn=len(self.turns) + 1)
        turn.started_ms = self._hooks.offset_ms(time.perf_counter())
        self.turns.append(turn)
        return turn

    def _end(self, turn: TurnTrace) -> None:
        turn.finished_ms = self._hooks.offset_ms(time.perf_counter())

    def _exhausted(self) -> errors.StepTurnsExhausted:
        return errors.StepTurnsExhausted(
            self.step.id, turns=len(self.turns), tool_calls=self.tool_calls
        )

    async def _chat(self, messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
        extra = self._schemas.extra  # the tools, and the answer's `response_format`
        self._state["messages"] = messages
        pending = self._pending()
        while len(self.turns) < self.step.max_turns:
            turn = self._begin()
            if pending is None:
                request = backends.ChatRequest(messages=list(messages), extra=extra, **options)
                reply = await self._model(turn, self._backend.chat(request))
                if not reply.tool_calls:
                    turn.final = True
                    self._end(turn)
                    return self._schemas.parse(reply.content)
                messages.append(
                    {
                        "role": "assistant",
                        "content": reply.content or None,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            }
                            for call in reply.tool_calls
                        ],
                    }
                )
                pending = _pending_turn(
                    [
                        {"id": call.id, "name": call.name, "arguments": call.arguments}
                        for call in reply.tool_calls
                    ],
                    fallback=reply.served_by,
                )
                self._state["pending"] = pending
                self._publish()
            else:  # the model asked for these calls in an earlier attempt
                turn.resumed, turn.fallback = True, pending.get("fallback")
                self._state["pending"] = pending
            actions = [
                self._parse(call["id"], call["name"], call["arguments"])
                for call in pending["calls"]
            ]
            results = await self._run_all(turn, actions, pending)
            for action, result in zip(actions, results, strict=True):
                messages.append({"role": "tool", "tool_call_id": action.id, "content": result})
            self._turn_ended(turn)
            pending = None
        raise self._exhausted()

    async def _complete(self, prompt: str, options: dict[str, Any]) -> Any:
        extra = self._schemas.extra  # the grammar of one action
        transcript = self._saved.get("transcript", "") if self._saved is not None else ""
        self._state["transcript"] = transcript
        pending = self._pending()
        while len(self.turns) < self.step.max_turns:
            number = len(self.turns) + 1
            turn = self._begin()
            if pending is not None:  # the model asked for this call in an earlier attempt
                turn.resumed, turn.fallback = True, pending.get("fallback")
                text = pending["text"]
                (call,) = pending["calls"]
                arguments = json.loads(call["arguments"])
                parsed = self._parse(call["id"], call["name"], call["arguments"], value=arguments)
            else:
                request = backends.CompletionRequest(
                    prompt=prompt + transcript, extra=extra, **options
                )
                reply = await self._model(turn, self._backend.complete(request))
                text = reply.content.strip()
                try:
                    action = json.loads(text)
                except ValueError:
                    action = None
                if isinstance(action, dict) and set(action) == {"answer"}:
                    turn.final = True
                    self._end(turn)
                    return self._final_value(action["answer"])
                if isinstance(action, dict) and isinstance(action.get("tool"), str):
                    arguments = action.get("arguments")
                    parsed = self._parse(
                        f"call_{number}", action["tool"], json.dumps(arguments), value=arguments
                    )
                    pending = _pending_turn(
                        [{"id": parsed.id, "name": parsed.name, "arguments": parsed.raw}],
                        text,
                        fallback=reply.served_by,
                    )
                    self._state["pending"] = pending
                    self._publish()
                else:
                    parsed = _Action(
                        f"call_{number}",
                        "",
                        text,
                        problem='not an action: expected {"tool": ..., "arguments": ...} '
                        'or {"answer": ...}',
                    )
            (result,) = await self._run_all(turn, [parsed], pending)
            transcript += f"{text}\n{RESULT_PREFIX}{result}\n"
            self._state["transcript"] = transcript
            self._turn_ended(turn)
            pending = None
        raise self._exhausted()

    def _final_value(self, value: Any) -> Any:
        if self.step.response_format is None:
            return value if isinstance(value, str) else json.dumps(value)
        return self._schemas.check(value)

    def _parse(self, call_id: str, name: str, raw: str, *, value: Any = None) -> _Action:
        action = _Action(call_id, name, raw)
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools))
            action.problem = f"unknown tool {name!r} (the tools are: {known})"
            return action
        if value is None:
            try:
                value = json.loads(raw) if raw.strip() else {}
            except ValueError as error:
                action.problem = f"arguments are not JSON: {error}"
                return action
        problems = structured.violations(self._schemas.tools[name], value)
        if problems:
            action.problem = "invalid arguments: " + "; ".join(problems[:5])
        elif not isinstance(value, dict):
            action.problem = "arguments must be a JSON object"
        else:
            action.arguments = value
        return action

    async def _run_all(
        self,
        turn: TurnTrace,
        actions: list[_Action],
        pending: checkpoints.PendingTurn | None = None,
    ) -> list[str]:
        """Each action's result text for the model, the valid ones run at once (bounded);
        with `pending`, results it holds are reused and new ones noted in it."""
        if pending is not None:
            self._refuse_resending(turn, actions, pending)
        calls: list[ToolCallTrace] = []
        for action in actions:
            done = pending.get("done", {}).get(action.id) if pending is not None else None
            calls.append(
                ToolCallTrace.of(done)
                if done
                else ToolCallTrace(
                    action.id, action.name, arguments=traces.arguments_summary(action.raw)
                )
            )
        turn.tool_calls.extend(calls)
        return list(
            await asyncio.gather(
                *(
                    self._run_kept(action, call, pending)
                    for action, call in zip(actions, calls, strict=True)
                )
            )
        )

    def _refuse_resending(
        self, turn: TurnTrace, actions: list[_Action], pending: checkpoints.PendingTurn
    ) -> None:
        """`StepFailed` when a call of a tool that is not idempotent was sent by an earlier
        attempt and never answered: it may have acted, so it is not sent again."""
        for action in actions:
            tool = self._tools.get(action.name)
            if (
                action.id in pending["sent"]
                and action.id not in pending["results"]
                and tool is not None
                and not tool.idempotent
            ):
                raise errors.StepFailed(
                    self.step.id,
                    f"tool call {action.id} ({action.name}) of turn {turn.turn} was sent before"
                    " the invocation was interrupted and never answered; the tool is not"
                    " idempotent, so it is not sent again",
                )

    async def _run_kept(
        self, action: _Action, call: ToolCallTrace, pending: checkpoints.PendingTurn | None
    ) -> str:
        """One call's result: reused from `pending`, or run and noted in it."""
        if pending is None:
            return await self._run_one(action, call)
        if action.id in pending["results"]:
            return pending["results"][action.id]
        result = await self._run_one(action, call, pending)
        pending["results"][action.id] = result
        pending.setdefault("done", {})[action.id] = call.to_json()
        self._publish()
        return result

    async def _run_one(
        self,
        action: _Action,
        trace: ToolCallTrace,
        pending: checkpoints.PendingTurn | None = None,
    ) -> str:
        trace.started_ms = trace.finished_ms = self._hooks.offset_ms(time.perf_counter())
        if action.arguments is None:
            trace.invalid = True
            trace.error = action.problem
            return json.dumps({"error": action.problem}, ensure_ascii=False)
        async with self._limit:
            if pending is not None and not self._tools[action.name].idempotent:
                pending["sent"].append(action.id)
                self._publish()  # before it is sent: a resumed loop will not send it again
            began = time.perf_counter()
            trace.started_ms = self._hooks.offset_ms(began)
            try:
                result = await self._call_tool(self._tools[action.name], action.arguments)
                trace.ok = True
            except ToolFailed as error:
                trace.error = str(error)
                result = {"error": str(error)}
            finally:
                ended = time.perf_counter()
                self._hooks.interval(began, ended)
                trace.finished_ms = self._hooks.offset_ms(ended)
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    async def _call_tool(self, tool: model.Tool, arguments: dict[str, Any]) -> Any:
        templates = self._templates[tool.name]
        context = {"inputs": self._inputs, "arguments": arguments}
        try:
            assert templates.url is not None
            url = templates.url.render(context)
            headers = {name: t.render(context) for name, t in templates.headers.items()}
            body = templates.body.render(context) if templates.body is not None else None
        except templating.RenderError as error:
            raise ToolFailed(f"{tool.name}: template failed: {error}") from error
        if not url.startswith(("http://", "https://")):
            raise ToolFailed(f"{tool.name}: url {url!r} is not an http(s) URL")
        if body is not None and "content-type" not in {name.lower() for name in headers}:
            headers["Content-Type"] = "application/json"
        method = tool.http.method
        try:
            async with (
                asyncio.timeout(tool.http.timeout_seconds),
                self._session.request(
                    method, url, headers=headers, data=body.encode() if body is not None else None
                ) as response,
            ):
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.content.iter_chunked(64 * 1024):
                    size += len(chunk)
                    if size > MAX_TOOL_RESULT_BYTES:
                        raise ToolFailed(
                            f"{tool.name}: answered more than {MAX_TOOL_RESULT_BYTES} bytes"
                        )
                    chunks.append(chunk)
                raw = b"".join(chunks)
                if response.status >= 400:
                    raise ToolFailed(f"{tool.name}: {method} {url} answered {response.status}")
                is_json = tool.http.response == "json" or (
                    tool.http.response == "auto" and response.content_type.endswith("json")
                )
                text = raw.decode(response.charset or "utf-8", errors="replace")
        except TimeoutError as error:
            raise ToolFailed(
                f"{tool.name}: no answer within {tool.http.timeout_seconds:g}s"
            ) from error
        except aiohttp.ClientError as error:
            raise ToolFailed(f"{tool.name}: {method} {url} failed: {error}") from error
        if not is_json:
            return text
        try:
            return json.loads(text)
        except ValueError as error:
            raise ToolFailed(f"{tool.name}: answered invalid JSON") from error


def _pending_turn(
    calls: list[checkpoints.PendingCall], text: str = "", *, fallback: str | None = None
) -> checkpoints.PendingTurn:
    pending: checkpoints.PendingTurn = {
        "calls": calls,
        "text": text,
        "results": {},
        "sent": [],
        "done": {},
    }
    if fallback is not None:
        pending["fallback"] = fallback
    return pending


class ToolFailed(Exception):
    """A tool call failed; its message goes back to the model as the call's result."""
