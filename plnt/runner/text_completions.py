"""`POST /v1/completions`: the workflow behind OpenAI's (legacy) text completions API.

Why beside chat completions: a workflow built on a base model continues text rather than
answering chats, and clients that autocomplete (editors, the OpenAI SDK's
`client.completions.create`) speak this API. The workflow is the one model named
`metadata.name`, as on `/v1/chat/completions`; the **prompt** becomes the inputs exactly
as a chat's last user message does (`chat.input`, else the only input, else a JSON
object), and the answer's `choices[0].text` is the workflow's output (text as is, other
values as JSON). Sampling parameters in the request (`max_tokens`, `temperature`, …) are
ignored: the workflow's steps fix them, as the spec that was deployed says.

`usage` is the invocation's (`plnt.api.usage`: reported by the backend or counted, with
`source`), absent when unknown. With `stream: true` the answer is Server-Sent Events of
`text_completion` chunks (`choices[0].text`), the output step's tokens relayed as they
come, a last chunk with `finish_reason: stop`, the usage chunk when
`stream_options.include_usage` asks and usage is known, then `data: [DONE]` (the same
machinery as chat streams, `chat_completions.stream_answer`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pydantic
from aiohttp import web

from plnt.api.usage import Usage
from plnt.runner import chat_completions, errors, handlers, keys, responses
from plnt.workflowspec import smoke


class CompletionRequest(pydantic.BaseModel):
    """The fields of an OpenAI text completion request the runner reads."""

    model_config = pydantic.ConfigDict(extra="allow")

    model: str
    prompt: str | list[str]
    stream: bool = False
    stream_options: chat_completions.StreamOptions | None = None

    def text(self) -> str:
        """The one prompt; several prompts in one request are refused (one workflow run
        answers one prompt)."""
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise errors.InvalidRequest("send one prompt per request")
        return self.prompt[0]


class _TextCompletion:
    """The identity every chunk of one text completion repeats."""

    def __init__(self, name: str) -> None:
        self.id = f"cmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = name

    def answer(self, text: str | None, finish_reason: str | None) -> dict[str, Any]:
        choices = [] if text is None else [_choice(text, finish_reason)]
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def piece(self, text: str, *, first: bool) -> dict[str, Any]:
        del first  # a text completion's chunks carry no role
        return self.answer(text, None)

    def finish(self) -> dict[str, Any]:
        return self.answer("", "stop")

    def usage(self, usage: Usage) -> dict[str, Any]:
        return {**self.answer(None, None), "usage": usage.to_json()}


def _choice(text: str, finish_reason: str | None) -> dict[str, Any]:
    return {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}


def _parse(body: Any, workflow_name: str) -> CompletionRequest:
    try:
        request = CompletionRequest.model_validate(body)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<body>'}: {item['msg']}"
            for item in error.errors()
        )
        raise errors.InvalidRequest(f"not a completion request: {problems}") from error
    if request.model != workflow_name:
        raise errors.ModelNotFound(request.model, workflow_name)
    return request


async def completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/completions: run the workflow on the prompt."""
    began = time.perf_counter()
    body = await responses.read_json(request)
    workflow = request.app[keys.WORKFLOW]
    completion_request = _parse(body, workflow.metadata.name)
    inputs = chat_completions.inputs_from_text(workflow, completion_request.text())
    completion = _TextCompletion(workflow.metadata.name)
    if completion_request.stream:
        options = completion_request.stream_options
        return await chat_completions.stream_answer(
            request,
            inputs,
            completion,
            endpoint="completion",
            wants_usage=options is not None and options.include_usage,
            began=began,
        )
    try:
        execution = await handlers.execute(
            request.app,
            inputs,
            endpoint="completion",
            cache_mode=handlers.cache_mode_of(request),
        )
    except errors.RunnerError as error:
        elapsed = (time.perf_counter() - began) * 1000.0
        timing = responses.server_timing(runner_ms=elapsed, backend_ms=None)
        return responses.error_response(error, headers={"Server-Timing": timing})
    answer = completion.answer(smoke.as_text(execution.output), "stop")
    answer["plnt"] = {
        "cache": handlers.cache_stats(request.app, execution),
        "trace": [step.to_json() for step in execution.trace],
    }
    if execution.usage is not None:
        answer["usage"] = execution.usage.to_json()
    return web.json_response(answer, headers=responses.headers_of(execution))
