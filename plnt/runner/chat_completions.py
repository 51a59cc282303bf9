"""The OpenAI-compatible face of the runner: `POST /v1/chat/completions` and `GET /v1/models`.

The workflow is exposed as one model named after `metadata.name`. A chat request is mapped
to inputs from its **last user message** (text, or the text parts of a content list):

1. when the spec has `chat.input: NAME`, the inputs are `{NAME: text}`;
2. otherwise, when the inputs schema has exactly one property, the text goes there;
3. otherwise the text must be a JSON object, which is used as the inputs.

The reply's content is the workflow output (text as is, anything else as JSON). With
`stream: true` the finished output is sent as Server-Sent Events in OpenAI's chunk format,
ending with `data: [DONE]`; the workflow itself runs to completion first.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pydantic
from aiohttp import web

from plnt.runner import errors, handlers, keys, responses
from plnt.workflowspec import model, smoke

STREAM_CHUNK_CHARS = 24


class ChatMessage(pydantic.BaseModel):
    """One message of a chat request; only role and content matter here."""

    model_config = pydantic.ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(pydantic.BaseModel):
    """The fields of an OpenAI chat completion request the runner reads."""

    model_config = pydantic.ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = pydantic.Field(min_length=1)
    stream: bool = False


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
    text = message_text(users[-1])
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
            "message"
        ) from error
    return inputs


def _completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions: run the workflow on the last user message."""
    began = time.perf_counter()
    body = await responses.read_json(request)
    try:
        chat = ChatRequest.model_validate(body)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<body>'}: {item['msg']}"
            for item in error.errors()
        )
        raise errors.InvalidRequest(f"not a chat completion request: {problems}") from error
    workflow = request.app[keys.WORKFLOW]
    inputs = inputs_from_messages(workflow, chat.messages)
    try:
        execution = await handlers.execute(request.app, inputs, endpoint="chat")
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    content = smoke.as_text(execution.output)
    created = int(time.time())
    completion_id = _completion_id()
    headers = {"Server-Timing": responses.timing_of(execution)}
    name = workflow.metadata.name
    if not chat.stream:
        prompt_words = sum(len(message_text(message).split()) for message in chat.messages)
        completion_words = len(content.split())
        return web.json_response(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_words,
                    "completion_tokens": completion_words,
                    "total_tokens": prompt_words + completion_words,
                },
                "plnt": {
                    "cache": handlers.cache_stats(request.app, execution),
                    "trace": [step.to_json() for step in execution.trace],
                },
            },
            headers=headers,
        )
    response = web.StreamResponse(
        headers={
            **headers,
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
        }
    )
    await response.prepare(request)

    async def send(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        chunk = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    await send({"role": "assistant", "content": ""})
    for start in range(0, len(content), STREAM_CHUNK_CHARS):
        await send({"content": content[start : start + STREAM_CHUNK_CHARS]})
    await send({}, finish_reason="stop")
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def models(request: web.Request) -> web.StreamResponse:
    """GET /v1/models: the workflow, as the one model this endpoint serves."""
    workflow = request.app[keys.WORKFLOW]
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": workflow.metadata.name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "plnt",
                }
            ],
        }
    )
