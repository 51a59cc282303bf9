"""Inference backends that `model` steps call: OpenAI-compatible APIs and a deterministic echo.

One protocol, `Backend.chat(request, on_delta=None) -> Reply`, hides whether the reply comes
from vLLM, Ollama's `/v1`, OpenAI, another plnt runner, or the echo backend used by tests
and the embedded demo. A `Reply` is the text and, when the backend reported it, its token
`Usage` (never estimated here: a backend that says nothing leaves it None).

With `on_delta` the call streams: the OpenAI-compatible client asks for Server-Sent Events
(`stream: true`, `stream_options: {include_usage: true}`) and calls `on_delta(text)` for each
content delta as it is read off the socket, then returns the whole reply as without
streaming. A backend that answers a stream request with one JSON body anyway (some
servers ignore `stream`) gives one delta. Leaving the call early (the step is cancelled
because the caller went away, or timed out) closes the backend connection, which is how an
inference server learns to stop generating. The client uses the app's shared aiohttp
session (created in a cleanup context, never at import time).

Exceptions (translated into step errors by the executor):

    BackendError          base
    ├── BackendUnavailable  connection refused/reset, an error status, or an error event
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

from plnt.runner import settings as runner_settings

DeltaListener = Callable[[str], None]
_WORDS = re.compile(r"\s*\S+|\s+")


class BackendError(Exception):
    """Base of every backend failure."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached or answered with an error status."""


class BackendTimeout(BackendError):
    """The backend did not answer in time."""


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request as a model step resolves it."""

    model: str
    messages: list[dict[str, str]]
    temperature: float | None = None
    max_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens as the backend counted them (OpenAI's `usage`)."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )

    def to_json(self) -> dict[str, int]:
        """OpenAI's `usage` object."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant's text and, when the backend reported it, the tokens it used."""

    content: str
    usage: Usage | None = None


def usage_of(payload: Any) -> Usage | None:
    """The `usage` of an OpenAI-shaped answer or chunk, None when absent or malformed."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Usage(prompt, completion)


class Backend(Protocol):
    """Anything that answers a chat request with the assistant's reply."""

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """The reply; with `on_delta`, its pieces are passed on as they arrive.
        Raises `BackendError` on failure."""
        ...


class EchoBackend:
    """Replies with the content of the last user message, after a configurable delay.

    Deterministic on purpose: the same messages always give the same reply, so tests and the
    embedded demo can assert on outputs and exercise the step cache. Streamed, the reply
    comes word by word after the delay. It reports no usage: it counts no tokens.
    """

    def __init__(self, *, latency_seconds: float = 0.0) -> None:
        self._latency = latency_seconds

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """Echo the last user message (or the last message when no user spoke)."""
        if self._latency > 0:
            await asyncio.sleep(self._latency)
        users = [message for message in request.messages if message["role"] == "user"]
        chosen = users[-1] if users else (request.messages[-1] if request.messages else None)
        content = chosen["content"] if chosen else ""
        if on_delta is not None:
            for word in _WORDS.findall(content):
                on_delta(word)
        return Reply(content)


class OpenAICompatibleBackend:
    """A client of `POST {endpoint}/chat/completions` (vLLM, Ollama /v1, OpenAI, plnt)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        endpoint: str,
        api_key: str | None = None,
        timeout_seconds: float = 300.0,
    ) -> None:
        self._session = session
        self._url = endpoint.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        body.update(request.extra)
        return body

    async def chat(self, request: ChatRequest, *, on_delta: DeltaListener | None = None) -> Reply:
        """One completion: the first choice's content and the reported usage."""
        body = self._body(request, stream=on_delta is not None)
        try:
            async with self._session.post(
                self._url, json=body, headers=self._headers, timeout=self._timeout
            ) as response:
                if response.status >= 400:
                    detail = (await response.text())[:300]
                    raise BackendUnavailable(
                        f"backend {self._url} answered {response.status}: {detail}"
                    )
                if on_delta is not None and response.content_type == "text/event-stream":
                    return await self._read_stream(response, on_delta)
                payload = await response.json(content_type=None)
        except TimeoutError as error:
            raise BackendTimeout(f"backend {self._url} did not answer in time") from error
        except aiohttp.ClientError as error:
            raise BackendUnavailable(f"backend {self._url} is unreachable: {error}") from error
        except ValueError as error:
            raise BackendUnavailable(f"backend {self._url} answered invalid JSON") from error
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as error:
            raise BackendUnavailable(
                f"backend {self._url} answered without choices[0].message.content"
            ) from error
        text = content if isinstance(content, str) else ""
        if on_delta is not None and text:
            on_delta(text)
        return Reply(text, usage_of(payload))

    async def _read_stream(
        self, response: aiohttp.ClientResponse, on_delta: DeltaListener
    ) -> Reply:
        """Read SSE `data:` events up to `[DONE]` (or the end of the body)."""
        pieces: list[str] = []
        usage: Usage | None = None
        async for raw in response.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, `event:`/`id:` fields
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                raise BackendUnavailable(f"backend {self._url} sent an error: {chunk['error']}")
            usage = usage_of(chunk) or usage
            piece = _delta_content(chunk)
            if piece:
                pieces.append(piece)
                on_delta(piece)
        return Reply("".join(pieces), usage)


def _delta_content(chunk: Any) -> str:
    """`choices[0].delta.content` of a stream chunk, "" when it has none."""
    try:
        content = chunk["choices"][0]["delta"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""
    return content if isinstance(content, str) else ""


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
