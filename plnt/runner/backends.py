"""Inference backends that `model` steps call: OpenAI-compatible APIs and a deterministic echo.

One protocol, `Backend.chat(request) -> str`, hides whether the reply comes from vLLM,
Ollama's `/v1`, OpenAI, another plnt runner, or the echo backend used by tests and the
embedded demo. The OpenAI-compatible client uses the app's shared aiohttp session (created
in a cleanup context, never at import time).

Exceptions (translated into step errors by the executor):

    BackendError          base
    ├── BackendUnavailable  connection refused/reset, or an error status from the backend
    └── BackendTimeout      the backend did not answer within the configured timeout
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from plnt.runner import settings as runner_settings


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


class Backend(Protocol):
    """Anything that answers a chat request with the assistant's reply text."""

    async def chat(self, request: ChatRequest) -> str:
        """The reply text; raises `BackendError` on failure."""
        ...


class EchoBackend:
    """Replies with the content of the last user message, after a configurable delay.

    Deterministic on purpose: the same messages always give the same reply, so tests and the
    embedded demo can assert on outputs and exercise the step cache.
    """

    def __init__(self, *, latency_seconds: float = 0.0) -> None:
        self._latency = latency_seconds

    async def chat(self, request: ChatRequest) -> str:
        """Echo the last user message (or the last message when no user spoke)."""
        if self._latency > 0:
            await asyncio.sleep(self._latency)
        users = [message for message in request.messages if message["role"] == "user"]
        chosen = users[-1] if users else (request.messages[-1] if request.messages else None)
        return chosen["content"] if chosen else ""


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

    async def chat(self, request: ChatRequest) -> str:
        """Send one non-streaming completion and return the first choice's content."""
        body: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body.update(request.extra)
        try:
            async with self._session.post(
                self._url, json=body, headers=self._headers, timeout=self._timeout
            ) as response:
                if response.status >= 400:
                    detail = (await response.text())[:300]
                    raise BackendUnavailable(
                        f"backend {self._url} answered {response.status}: {detail}"
                    )
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
