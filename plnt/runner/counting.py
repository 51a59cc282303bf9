"""Counting a streamed completion's tokens when its backend does not report them.

Why: llama-cpp-python's server sends no `usage` in a stream, even when asked with
`stream_options.include_usage` (it reports usage only on answers that are not streamed),
and a streamed answer without tokens leaves `/bench`, the runner's token metrics and every
client that pays by the token blind. So the runner counts, and marks the usage `counted`
(`plnt.api.usage`):

* completion tokens: the stream's content deltas. That server sends one generated token
  per chunk (checked against its own non-streamed `completion_tokens` in
  `tests/model`); it merges tokens into one chunk only where a character spans several
  tokens, or holds back text that may begin a `stop` sequence, so there the count can be
  lower than the tokens generated. The caller counts the deltas;
* prompt tokens: the server's own tokenizer, `POST {root}/extras/tokenize/count` with
  `{"input": prompt, "model": model}` answering `{"count": N}` (`root` is the endpoint
  without its `/v1`). It counts as the completion does (the BOS token included), so the
  result equals the `prompt_tokens` the server reports for the same prompt.

When the count is asked: the first stream of a backend is read with nothing extra. Once a
stream came without usage the backend is known not to report, and each later streamed
completion asks for the prompt's count at the same moment it sends the completion: that
server handles one request at a time, so a count asked only after the stream would wait
behind every other caller's generation, while one asked alongside is answered (in about a
millisecond) before or right after this generation. A backend that has no such endpoint
(404, 405, 501) is not asked again; any failure (an error, no answer within
`COUNT_TIMEOUT`) leaves the usage unknown and never fails the step. A chat's prompt is
rendered by the server's chat template, which the runner never sees: chat streams are
not counted.

Errors: none of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp

from plnt.processes import tasks

COUNT_TIMEOUT = 10.0
"""Seconds a prompt count may take before the usage is left unknown."""
_ABSENT = frozenset({404, 405, 501})


class PromptCount:
    """One prompt's token count: asked already (a task), or asked when `result` is awaited."""

    def __init__(
        self, counter: UsageCounter, model: str, prompt: str, task: asyncio.Task[int | None] | None
    ) -> None:
        self._counter = counter
        self._model = model
        self._prompt = prompt
        self._task = task

    async def result(self) -> int | None:
        """The count, or None when it could not be had."""
        if self._task is not None:
            return await self._task
        return await self._counter.count(self._model, self._prompt)


class UsageCounter:
    """Counts prompts through one backend's tokenizer endpoint, and remembers whether the
    backend reports usage in its streams (and whether it has the endpoint at all)."""

    def __init__(
        self, session: aiohttp.ClientSession, *, endpoint: str, headers: dict[str, str]
    ) -> None:
        self._session = session
        self.url = endpoint.rstrip("/").removesuffix("/v1") + "/extras/tokenize/count"
        self._headers = headers
        self.reports_usage: bool | None = None
        """None until a stream was read; then whether the last one carried usage."""
        self.available = True

    def learn(self, *, reports_usage: bool) -> None:
        """Record whether the stream just read carried the backend's own usage."""
        self.reports_usage = reports_usage

    @contextlib.asynccontextmanager
    async def counting(self, model: str, prompt: str) -> AsyncIterator[PromptCount]:
        """A `PromptCount` for one streamed completion: already being asked for when the
        backend is known not to report usage, else asked only if needed. A count still
        running when the block ends is cancelled (the usage was reported after all)."""
        if self.reports_usage is False and self.available:
            coroutine = self.count(model, prompt)
            async with tasks.running(coroutine, name="count prompt tokens") as task:
                yield PromptCount(self, model, prompt, task)
        else:
            yield PromptCount(self, model, prompt, None)

    async def count(self, model: str, prompt: str) -> int | None:
        """The prompt's token count by the backend's tokenizer, None when not to be had."""
        if not self.available:
            return None
        timeout = aiohttp.ClientTimeout(total=COUNT_TIMEOUT)
        try:
            async with self._session.post(
                self.url,
                json={"input": prompt, "model": model},
                headers=self._headers,
                timeout=timeout,
            ) as response:
                if response.status in _ABSENT:
                    self.available = False
                    return None
                if response.status >= 400:
                    return None
                body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        count = body.get("count") if isinstance(body, dict) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None
