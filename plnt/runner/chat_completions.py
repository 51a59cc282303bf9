"""The OpenAI-compatible face of the runner: `POST /v1/chat/completions` and `GET /v1/models`.

The workflow is exposed as one model named after `metadata.name`; a request naming another
model is a 404 `model_not_found`, as OpenAI answers it. A chat request is mapped to inputs
from its **last user message** (text, or the text parts of a content list):

1. when the spec has `chat.input: NAME`, the inputs are `{NAME: text}`;
2. otherwise, when the inputs schema has exactly one property, the text goes there;
3. otherwise the text must be a JSON object, which is used as the inputs.

The reply's content is the workflow output (text as is, anything else as JSON). `usage` is
the tokens of the model steps that called the backend, summed, reported by it or counted
(`source`, see `plnt.api.usage`), and absent when unknown (see `executing`).

With `stream: true` the answer is Server-Sent Events in OpenAI's chunk format, ending with
`data: [DONE]`. When the workflow's output is one model step's output, that step's tokens
are relayed as the backend streams them; the first event goes out with the first token (the
role and the first piece in one chunk), so the time to the first byte of the body is the
time to the first token. Any other workflow runs to completion first and its output is sent
in pieces. With `stream_options: {include_usage: true}` a last chunk with empty `choices`
carries `usage` when it is known. A failure after the first event becomes an event
`{"error": {...}}` (the SDK raises it) and no `[DONE]`. `stream_answer` is that machinery
for both OpenAI endpoints: text completions (`text_completions`) stream through it with
their own chunk shape (`Chunks`).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import pydantic
from aiohttp import web

from plnt.api.usage import Usage
from plnt.runner import errors, handlers, keys, responses, streaming
from plnt.workflowspec import model, smoke

STREAM_CHUNK_CHARS = 24
log = logging.getLogger(__name__)


class ChatMessage(pydantic.BaseModel):
    """One message of a chat request; only role and content matter here."""

    model_config = pydantic.ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(pydantic.BaseModel):
    """OpenAI's `stream_options`."""

    model_config = pydantic.ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(pydantic.BaseModel):
    """The fields of an OpenAI chat completion request the runner reads."""

    model_config = pydantic.ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = pydantic.Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None


def message_text(message: ChatMessage) -> str:
    """The text of a message: the string content, or its text parts joined."""
    if isinstance(message.content, str):
        return message.content
    if not message.content:
        return ""
    return "".join(
        str(part.get("text", "")) for part in message.content if part.get("type") == "text"
    )


def inputs_from_messages(workflow: model.Workflow, messages: list[ChatMessage]) -> Any:
    """Inputs for the workflow from the last user message, per the documented mapping."""
    users = [message for message in messages if message.role == "user"]
    if not users:
        raise errors.InvalidRequest("the request has no user message to use as input")
    return inputs_from_text(workflow, message_text(users[-1]))


def inputs_from_text(workflow: model.Workflow, text: str) -> Any:
    """Inputs for the workflow from one text (a chat's last user message, a completion's
    prompt): `chat.input`, else the only input, else the text as a JSON object."""
    if workflow.chat is not None:
        return {workflow.chat.input: text}
    properties = workflow.inputs.get("properties")
    if isinstance(properties, dict) and len(properties) == 1:
        return {next(iter(properties)): text}
    try:
        inputs = json.loads(text)
    except json.JSONDecodeError as error:
        raise errors.InvalidRequest(
            "this workflow takes several inputs: send them as a JSON object in the last user "
            "message (or the prompt)"
        ) from error
    return inputs


def _parse(body: Any, workflow: model.Workflow) -> ChatRequest:
    try:
        chat = ChatRequest.model_validate(body)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<body>'}: {item['msg']}"
            for item in error.errors()
        )
        raise errors.InvalidRequest(f"not a chat completion request: {problems}") from error
    if chat.model != workflow.metadata.name:
        raise errors.ModelNotFound(chat.model, workflow.metadata.name)
    return chat


class Chunks(Protocol):
    """The chunks of one streamed answer, in its API's shape (chat or text completion)."""

    def piece(self, text: str, *, first: bool) -> dict[str, Any]:
        """A chunk carrying one piece of the output."""
        ...

    def finish(self) -> dict[str, Any]:
        """The chunk saying the output is complete (`finish_reason: stop`)."""
        ...

    def usage(self, usage: Usage) -> dict[str, Any]:
        """The last chunk, with empty `choices` and the invocation's `usage`."""
        ...


class _Completion:
    """The identity every chunk of one chat completion repeats."""

    def __init__(self, name: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = name

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def piece(self, text: str, *, first: bool) -> dict[str, Any]:
        return self.chunk({"role": "assistant", "content": text} if first else {"content": text})

    def finish(self) -> dict[str, Any]:
        return self.chunk({}, finish_reason="stop")

    def usage(self, usage: Usage) -> dict[str, Any]:
        return {**self.chunk({}), "choices": [], "usage": usage.to_json()}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions: run the workflow on the last user message."""
    began = time.perf_counter()
    body = await responses.read_json(request)
    workflow = request.app[keys.WORKFLOW]
    chat = _parse(body, workflow)
    inputs = inputs_from_messages(workflow, chat.messages)
    if chat.stream:
        return await _stream(request, chat, inputs, began=began)
    try:
        execution = await handlers.execute(
            request.app, inputs, endpoint="chat", cache_mode=handlers.cache_mode_of(request)
        )
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    completion = _Completion(workflow.metadata.name)
    answer: dict[str, Any] = {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": smoke.as_text(execution.output)},
                "finish_reason": "stop",
            }
        ],
        "plnt": {
            "cache": handlers.cache_stats(request.app, execution),
            "trace": [step.to_json() for step in execution.trace],
        },
    }
    if execution.usage is not None:
        answer["usage"] = execution.usage.to_json()
    return web.json_response(answer, headers=responses.headers_of(execution))


async def _stream(
    request: web.Request, chat: ChatRequest, inputs: Any, *, began: float
) -> web.StreamResponse:
    completion = _Completion(request.app[keys.WORKFLOW].metadata.name)
    wants_usage = chat.stream_options is not None and chat.stream_options.include_usage
    return await stream_answer(
        request, inputs, completion, endpoint="chat", wants_usage=wants_usage, began=began
    )


async def stream_answer(
    request: web.Request,
    inputs: Any,
    chunks: Chunks,
    *,
    endpoint: str,
    wants_usage: bool,
    began: float,
) -> web.StreamResponse:
    """The SSE answer of a chat or text completion: errors before the stream are JSON,
    after it an error event."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": streaming.EVENT_STREAM, "Cache-Control": "no-cache"}
    )
    writer = streaming.Writer(response)
    sent = False

    def piece(text: str) -> None:
        nonlocal sent
        writer.send_bytes(streaming.sse_event(chunks.piece(text, first=not sent)))
        sent = True

    async def start() -> None:
        await response.prepare(request)

    try:
        async with writer:
            try:
                execution = await handlers.execute(
                    request.app,
                    inputs,
                    endpoint=endpoint,
                    on_delta=lambda _step, text: piece(text),
                    on_valid=start,
                    cache_mode=handlers.cache_mode_of(request),
                )
            except errors.RunnerError as error:
                if not response.prepared:
                    raise
                writer.send_bytes(streaming.sse_event(responses.error_body(error)))
            except Exception:
                if not response.prepared:
                    raise
                log.exception("unhandled error streaming %s", request.path)
                internal = errors.RunnerError("internal error")
                writer.send_bytes(streaming.sse_event(responses.error_body(internal)))
            else:
                if not sent:
                    _in_pieces(smoke.as_text(execution.output), piece)
                writer.send_bytes(streaming.sse_event(chunks.finish()))
                if wants_usage and execution.usage is not None:
                    writer.send_bytes(streaming.sse_event(chunks.usage(execution.usage)))
                writer.send_bytes(streaming.sse_event("[DONE]"))
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    return response


def _in_pieces(content: str, piece: Callable[[str], None]) -> None:
    """A finished output that streamed no tokens, sent in pieces (one empty piece for "")."""
    if not content:
        piece("")
    for start in range(0, len(content), STREAM_CHUNK_CHARS):
        piece(content[start : start + STREAM_CHUNK_CHARS])


async def models(request: web.Request) -> web.StreamResponse:
    """GET /v1/models: the workflow, as the one model this endpoint serves.

    Beside OpenAI's fields, `plnt` carries what a client needs to call the workflow: its
    version, its inputs JSON Schema and the input a chat message fills (null when the
    workflow takes no chat); OpenAI clients ignore fields they do not know.
    """
    workflow = request.app[keys.WORKFLOW]
    chat = workflow.chat
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": workflow.metadata.name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "plnt",
                    "plnt": {
                        "version": workflow.metadata.version,
                        "inputs": workflow.inputs,
                        "chatInput": None if chat is None else chat.input,
                    },
                }
            ],
        }
    )
