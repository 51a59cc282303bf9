"""Inference backends that `model` steps call: OpenAI-compatible APIs and a deterministic echo.

One protocol, `Backend.chat(request, on_delta=None)` for chat steps and
`Backend.complete(request, on_delta=None)` for completion steps (`mode: completion`: plain
text continued by the completions API, what base models are served through), hides
whether the reply comes from vLLM, Ollama's `/v1`, OpenAI, llama-cpp-python's server,
another plnt runner, or the echo backend used by tests and the embedded demo. A `Reply`
is the text and, when known, its token `Usage` (`plnt.api.usage`).

With `on_delta` the call streams: the OpenAI-compatible client asks for Server-Sent Events
(`stream: true`, `stream_options: {include_usage: true}`) and calls `on_delta(text)` for each
content delta as it is read off the socket, then returns the whole reply as without
streaming. A backend that answers a stream request with one JSON body anyway (some
servers ignore `stream`) gives one delta. Leaving the call early (the step is cancelled
because the caller went away, or timed out) closes the backend connection, which is how an
inference server learns to stop generating. The client uses the app's shared aiohttp
session (created in a cleanup context, never at import time).

A stream is whole only when the model said it finished: some chunk carries a
`finish_reason` (`stop`, `length`, …), as every OpenAI-compatible server sends before
`[DONE]`. A stream that ends without one — `[DONE]` early, or the body's end — was cut
off upstream (llama-cpp-python's server, for one, ends a stream with a bare `[DONE]` when
another request waits for its model), and is a `StreamCutShort` error, never a shorter
answer passed off as whole.

Usage is what the backend reported (`source: reported`). A backend that streams without
it (llama-cpp-python's server sends none, whatever the request asks) gets its tokens
counted instead, by `counting.UsageCounter`, for completion calls, once the stream has
ended (never while it is read: see `plnt.runner.counting`): the completion tokens are the
stream's content deltas (that server sends one token per delta) and the prompt tokens the
server's own tokenizer's count; the usage is then marked `counted`. A chat call's prompt
is rendered by the server's chat template, which the client never sees, so an unreported
chat stream has no usage (None): nothing is estimated.

Each request carries the call's time left (`X-Plnt-Timeout-Ms`) and criticality, from the
invocation's `plnt.runner.deadlines` context, so a backend that is another plnt runner holds
the call to the same deadline. Admission, the breaker and the fallback wrap these clients
(`plnt.runner.guarding`); none of them retries.

Exceptions (translated into step errors by the executor):

    BackendError          base
    ├── BackendUnavailable  connection refused/reset, an error status, or an error event
    │   └── StreamCutShort  the stream ended before the model said it finished
    └── BackendTimeout      the backend did not answer within the configured timeout
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from plnt.api.headers import CRITICALITY_HEADER, TIMEOUT_HEADER
from plnt.api.usage import Usage, UsageSource
from plnt.runner import counting, deadlines
from plnt.runner import settings as runner_settings

DeltaListener = Callable[[str], None]
_WORDS = re.compile(r"\s*\S+|\s+")


class BackendError(Exception):
    """Base of every backend failure."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached or answered with an error status."""


class StreamCutShort(BackendUnavailable):
    """A stream ended (`[DONE]` or the end of the body) with no `finish_reason` in any
    chunk: the backend stopped sending before the model finished."""


class BackendTimeout(BackendError):
    """The backend did not answer in time."""


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request as a model step resolves it."""

    model: str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletionRequest:
    """A text completion request as a completion step resolves it: the prompt to continue."""

    model: str
    prompt: str
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """More body fields, e.g. a GBNF `grammar` (llama.cpp's servers take one)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call a chat answer asked for: OpenAI's `tool_calls[i]`; `arguments`
    is the JSON text as the model wrote it (it may not even be JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Reply:
    """The generated text, the tool calls asked for (chat only) and, when known, the
    tokens it used."""

    content: str
    usage: Usage | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    served_by: str | None = None
    """The fallback backend that produced it (None: the backend asked; `plnt.runner.guarding`)."""


def usage_of(payload: Any) -> Usage | None:
    """The `usage` of an OpenAI-shaped answer or chunk, None when absent or malformed."""
    return Usage.of_answer(payload)


class Backend(Protocol):
    """Anything that answers chat and completion requests with the generated text."""

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """The assistant's reply; with `on_delta`, its pieces are passed on as they arrive.
        Raises `BackendError` on failure."""
        ...

    async def complete(
        self, request: CompletionRequest, *, on_delta: DeltaListener | None = None
    ) -> Reply:
        """The continuation of the prompt; streamed as `chat` is. Raises `BackendError`."""
        ...


class EchoBackend:
    """Replies with the content of the last user message (a completion: with the prompt),
    after a configurable delay.

    Deterministic on purpose: the same request always gives the same reply, so tests and
    the embedded demo can assert on outputs and exercise the step cache. Streamed, the
    reply comes word by word after the delay. It reports no usage: it counts no tokens.
    """

    def __init__(self, *, latency_seconds: float = 0.0) -> None:
        self._latency = latency_seconds

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """Echo the last user message (or the last message when no user spoke)."""
        users = [message for message in request.messages if message["role"] == "user"]
        chosen = users[-1] if users else (request.messages[-1] if request.messages else None)
        return await self._echo(chosen["content"] if chosen else "", on_delta)

    async def complete(
        self, request: CompletionRequest, *, on_delta: DeltaListener | None = None
    ) -> Reply:
        """Echo the prompt."""
        return await self._echo(request.prompt, on_delta)

    async def _echo(self, content: str, on_delta: DeltaListener | None) -> Reply:
        if self._latency > 0:
            await asyncio.sleep(self._latency)
        if on_delta is not None:
            for word in _WORDS.findall(content):
                on_delta(word)
        return Reply(content)


@dataclass(frozen=True, slots=True)
class _Api:
    """One OpenAI endpoint: its URL and where the text sits in an answer and in a chunk."""

    url: str
    text_of: Callable[[Any], Any]
    """The text of a whole answer (KeyError, IndexError or TypeError when it has none)."""
    piece_of: Callable[[Any], str]
    """The text of one stream chunk ("" when it has none)."""
    shape: str
    """What the answer must hold, for the error that says it did not."""


def _message_content(payload: Any) -> Any:
    return payload["choices"][0]["message"]["content"]


def _tool_calls(payload: Any) -> tuple[ToolCall, ...]:
    """`choices[0].message.tool_calls` of a chat answer; malformed entries are skipped."""
    try:
        calls = payload["choices"][0]["message"].get("tool_calls") or []
    except (KeyError, IndexError, TypeError, AttributeError):
        return ()
    found = []
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        call_id = call.get("id")
        found.append(
            ToolCall(
                call_id if isinstance(call_id, str) else f"call_{position}",
                function["name"],
                arguments,
            )
        )
    return tuple(found)


def _choice_text(payload: Any) -> Any:
    return payload["choices"][0]["text"]


def _delta_content(chunk: Any) -> str:
    """`choices[0].delta.content` of a chat stream chunk, "" when it has none."""
    try:
        content = chunk["choices"][0]["delta"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return content if isinstance(content, str) else ""


def _finish_reason(chunk: Any) -> str | None:
    """`choices[0].finish_reason` of a stream chunk (chat or text), None when unset."""
    try:
        reason = chunk["choices"][0].get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return reason if isinstance(reason, str) and reason else None


def _chunk_text(chunk: Any) -> str:
    """`choices[0].text` of a text completion stream chunk, "" when it has none."""
    try:
        text = chunk["choices"][0].get("text")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return text if isinstance(text, str) else ""


@dataclass
class _Streamed:
    """What a stream carried: the text pieces and the usage, if the backend sent one."""

    pieces: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    """Why the model stopped, from the chunk that said so; None: it never said."""


class OpenAICompatibleBackend:
    """A client of `POST {endpoint}/chat/completions` and `POST {endpoint}/completions`
    (vLLM, Ollama /v1, OpenAI, llama-cpp-python, plnt)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        endpoint: str,
        api_key: str | None = None,
        timeout_seconds: float = 300.0,
    ) -> None:
        self._session = session
        base = endpoint.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._chat = _Api(
            base + "/chat/completions",
            _message_content,
            _delta_content,
            "choices[0].message.content",
        )
        self._completions = _Api(
            base + "/completions", _choice_text, _chunk_text, "choices[0].text"
        )
        self._counter = counting.UsageCounter(session, endpoint=base, headers=self._headers)

    @staticmethod
    def _options(
        body: dict[str, Any],
        request: ChatRequest | CompletionRequest,
        *,
        stream: bool,
    ) -> dict[str, Any]:
        for key, value in (
            ("temperature", request.temperature),
            ("max_tokens", request.max_tokens),
            ("stop", request.stop),
            ("seed", request.seed),
        ):
            if value is not None:
                body[key] = value
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """One chat completion: the first choice's content and the reported usage."""
        body = {"model": request.model, "messages": request.messages}
        body = self._options(body, request, stream=on_delta is not None)
        body.update(request.extra)
        return await self._call(self._chat, body, on_delta, counted=None)

    async def complete(
        self, request: CompletionRequest, *, on_delta: DeltaListener | None = None
    ) -> Reply:
        """One text completion: the first choice's text and its usage, reported by the
        backend or, for a stream that carried none, counted (see the module docstring)."""
        body = {"model": request.model, "prompt": request.prompt}
        body = self._options(body, request, stream=on_delta is not None)
        body.update(request.extra)
        return await self._call(self._completions, body, on_delta, counted=request)

    async def _call(
        self,
        api: _Api,
        body: dict[str, Any],
        on_delta: DeltaListener | None,
        *,
        counted: CompletionRequest | None,
    ) -> Reply:
        try:
            async with self._session.post(
                api.url, json=body, headers=self._call_headers(), timeout=self._timeout
            ) as response:
                if response.status >= 400:
                    detail = (await response.text())[:300]
                    raise BackendUnavailable(
                        f"backend {api.url} answered {response.status}: {detail}"
                    )
                if on_delta is not None and response.content_type == "text/event-stream":
                    streamed = await self._read_stream(api, response, on_delta)
                    return Reply("".join(streamed.pieces), await self._usage(streamed, counted))
                payload = await response.json(content_type=None)
        except TimeoutError as error:
            raise BackendTimeout(f"backend {api.url} did not answer in time") from error
        except aiohttp.ClientError as error:
            raise BackendUnavailable(f"backend {api.url} is unreachable: {error}") from error
        except ValueError as error:
            raise BackendUnavailable(f"backend {api.url} answered invalid JSON") from error
        calls = _tool_calls(payload) if api is self._chat else ()
        try:
            content = api.text_of(payload)
        except (KeyError, IndexError, TypeError) as error:
            raise BackendUnavailable(f"backend {api.url} answered without {api.shape}") from error
        text = content if isinstance(content, str) else ""
        if on_delta is not None and text:
            on_delta(text)
        return Reply(text, usage_of(payload), calls)

    def _call_headers(self) -> dict[str, str]:
        """The credentials, and the call's time left and criticality, so a backend that reads
        them (another plnt runner) holds the call to the same deadline."""
        context = deadlines.current()
        headers = dict(self._headers)
        left = context.deadline.header_ms()
        if left is not None:
            headers[TIMEOUT_HEADER] = left
        headers[CRITICALITY_HEADER] = context.criticality.value
        return headers

    async def _usage(self, streamed: _Streamed, counted: CompletionRequest | None) -> Usage | None:
        """The stream's reported usage; else, for a completion, the counted one (asked now
        that the stream has ended: `plnt.runner.counting`)."""
        if streamed.usage is not None or counted is None:
            return streamed.usage
        prompt = await self._counter.count(counted.model, counted.prompt)
        if prompt is None:
            return None
        return Usage(prompt, len(streamed.pieces), UsageSource.COUNTED)

    async def _read_stream(
        self, api: _Api, response: aiohttp.ClientResponse, on_delta: DeltaListener
    ) -> _Streamed:
        """Read SSE `data:` events up to `[DONE]` (or the end of the body); `StreamCutShort`
        when no chunk said why the model stopped."""
        streamed = _Streamed()
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, `event:`/`id:` fields
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                raise BackendUnavailable(f"backend {api.url} sent an error: {chunk['error']}")
            streamed.usage = usage_of(chunk) or streamed.usage
            streamed.finish_reason = _finish_reason(chunk) or streamed.finish_reason
            piece = api.piece_of(chunk)
            if piece:
                streamed.pieces.append(piece)
                on_delta(piece)
        if streamed.finish_reason is None:
            raise StreamCutShort(
                f"backend {api.url} ended its stream after {len(streamed.pieces)} pieces"
                " without saying the model finished (no finish_reason): the answer was cut off"
            )
        return streamed


def make_backend(
    config: runner_settings.BackendConfig, *, session: aiohttp.ClientSession
) -> Backend:
    """The backend a configuration describes."""
    if config.type == "echo":
        return EchoBackend(latency_seconds=config.latency_ms / 1000.0)
    return OpenAICompatibleBackend(
        session,
        endpoint=config.endpoint or "",
        api_key=config.resolved_api_key(),
        timeout_seconds=config.timeout_seconds,
    )
