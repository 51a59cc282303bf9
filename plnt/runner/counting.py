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

When the count is asked: only once the stream has ended, never while it is read. That
server generates for one request at a time and, by default (`interrupt_requests`), ends
the stream it is sending with `[DONE]` as soon as any other request waits for the model:
a count asked alongside the completion cut the caller's answer off after its first token.
plnt's own model server (`plnt.processes.llamaserving`) answers the count from a tokenizer
of its own, outside the model's lock, so there it takes about a millisecond; another
llama-cpp-python server may make it wait for the generation ahead of it. A backend that
has no such endpoint (404, 405, 501) is not asked again; any failure (an error, no answer
within `COUNT_TIMEOUT`) leaves the usage unknown and never fails the step. A chat's prompt
is rendered by the server's chat template, which the runner never sees: chat streams are
not counted.

Errors: none of its own.
"""

from __future__ import annotations

import aiohttp

COUNT_TIMEOUT = 10.0
"""Seconds a prompt count may take before the usage is left unknown."""
_ABSENT = frozenset({404, 405, 501})


class UsageCounter:
    """Counts prompts through one backend's tokenizer endpoint, and remembers whether the
    backend has the endpoint at all."""

    def __init__(
        self, session: aiohttp.ClientSession, *, endpoint: str, headers: dict[str, str]
    ) -> None:
        self._session = session
        self.url = endpoint.rstrip("/").removesuffix("/v1") + "/extras/tokenize/count"
        self._headers = headers
        self.available = True

    async def count(self, model: str, prompt: str) -> int | None:
        """The prompt's token count by the backend's tokenizer, None when not to be had.
        Called after the completion's stream ended (see the module docstring)."""
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
