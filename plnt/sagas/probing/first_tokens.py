"""A backend's time to first token, measured on one small streamed chat completion.

Reachability (`GET /models`) says a server is up, not how soon it answers a call: a
backend whose queue is long, or whose model is large for its hardware, answers `/models`
at once and its first token seconds later. Placement holds a run's `timeToFirstToken`
objective against what this measures, so the probe asks what a caller asks: a chat
completion of one short message, streamed, at most a couple of tokens, timed from the
request to the first chunk that carries text, or that ends the answer without any: a
model may end at its first token (a base model, such as the pinned Gemma `plnt up --model`
serves, asked to chat ends the turn at once), and the chunk saying so is still the first
token the model produced, so the server's time to it is what the probe measures.

Asked only of a backend that names a model (`spec.models[0]`) and needs no credentials
(probes carry none, as the reachability check): anything else is not measured (None),
never a made-up figure. Activity-side code (aiohttp); errors are returned as words, never
raised, so a probe that fails still writes the rest of the status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from plnt.api.headers import PROBE_HEADER

PROMPT = "Say hi."
MAX_TOKENS = 2
TIMEOUT_SECONDS = 5.0
"""The whole request's budget: a first token later than this is a failed probe."""

PROBED_TYPES = frozenset({"openai", "vllm", "ollama"})


@dataclass(frozen=True, slots=True)
class FirstToken:
    """Milliseconds to the first token (None: not measured), and what the probe saw."""

    milliseconds: int | None
    detail: str
    failed: bool = False


def model_to_ask(spec: Mapping[str, Any]) -> str | None:
    """The model a probe asks of this backend, or None when it is not probed for TTFT."""
    models = spec.get("models") or []
    if spec.get("type") not in PROBED_TYPES or not spec.get("endpoint") or not models:
        return None
    if spec.get("credentialsRef"):
        return None
    return str(models[0])


def _finished(chunk: Any) -> bool:
    """Whether a streamed chunk says the model stopped (`finish_reason` set)."""
    if not isinstance(chunk, dict):
        return False
    choices = chunk.get("choices") or []
    return any(isinstance(choice, dict) and choice.get("finish_reason") for choice in choices)


def _text_of(chunk: Any) -> str:
    """The text a streamed chat chunk carries ('' for a role-only or empty delta)."""
    if not isinstance(chunk, dict):
        return ""
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta") or {}
        text = delta.get("content") if isinstance(delta, dict) else None
        text = text or choice.get("text")
        if isinstance(text, str) and text:
            return text
    return ""


async def measure(
    session: aiohttp.ClientSession, endpoint: str, model: str, *, budget: float = TIMEOUT_SECONDS
) -> FirstToken:
    """Stream one small chat completion from `endpoint` and time its first token."""
    url = f"{endpoint.rstrip('/')}/chat/completions"
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "stream": True,
    }
    began = time.perf_counter()
    try:
        async with session.post(
            url,
            json=body,
            headers={PROBE_HEADER: "ttft"},
            timeout=aiohttp.ClientTimeout(total=budget),
        ) as response:
            if response.status >= 300:
                return FirstToken(None, f"POST {url}: HTTP {response.status}", failed=True)
            async for raw in response.content:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line.removeprefix("data:").strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    continue
                if _text_of(chunk):
                    elapsed = round((time.perf_counter() - began) * 1000.0)
                    return FirstToken(elapsed, f"POST {url}: first token in {elapsed} ms")
                if _finished(chunk):
                    elapsed = round((time.perf_counter() - began) * 1000.0)
                    detail = f"POST {url}: the answer ended at its first token, in {elapsed} ms"
                    return FirstToken(elapsed, detail)
    except (aiohttp.ClientError, TimeoutError) as error:
        return FirstToken(None, f"POST {url}: {error or type(error).__name__}", failed=True)
    return FirstToken(None, f"POST {url}: the stream carried no token", failed=True)
