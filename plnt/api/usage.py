"""Token usage on the wire: OpenAI's `usage` object, and whether the tokens were reported or
counted.

A model backend normally reports what a call used (`usage` on an answer, and in a last
stream chunk when asked with `stream_options.include_usage`). Some stream without it
(llama-cpp-python's server, whatever the request asks); for those the runner counts
(`plnt.runner.backends`) and says so: every `usage` plnt answers carries `source`,
`reported` (the backend's own numbers) or `counted` (plnt counted at least part of it).
The runner writes it into its answers (`/invoke` results, chat and text completions, the
usage chunk of a stream); the API server reads it back from those answers for the
invocation log (`Usage.of_answer`); both go through this module, so the rule is written
once.

No I/O here, and no pydantic (the CLI may import it at start-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class UsageSource(StrEnum):
    """Who counted the tokens of a `usage`."""

    REPORTED = "reported"
    """The backend's own numbers."""
    COUNTED = "counted"
    """Counted by plnt: completion tokens as the stream's content deltas (one token each
    on the servers this is used for), prompt tokens by the server's tokenizer endpoint."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call (or the sum of an invocation's calls) used, and their source."""

    prompt_tokens: int
    completion_tokens: int
    source: UsageSource = UsageSource.REPORTED

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """The sum; counted when either part was (a sum is only as exact as its parts)."""
        counted = UsageSource.COUNTED in (self.source, other.source)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            UsageSource.COUNTED if counted else UsageSource.REPORTED,
        )

    def to_json(self) -> dict[str, Any]:
        """OpenAI's `usage` object, with `source`."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "source": self.source.value,
        }

    def to_log(self) -> dict[str, Any]:
        """The invocation log's `usage` entry (camelCase, as the log's other fields)."""
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "source": self.source.value,
        }

    @classmethod
    def of_answer(cls, payload: Any) -> Usage | None:
        """The `usage` of an OpenAI-shaped answer or chunk, or of a plnt answer; None when
        absent or malformed. Without a `source` (a backend's own answer) it is reported."""
        usage = payload.get("usage") if isinstance(payload, dict) else None
        if not isinstance(usage, dict):
            return None
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        source = usage.get("source")
        counted = source == UsageSource.COUNTED.value
        return cls(prompt, completion, UsageSource.COUNTED if counted else UsageSource.REPORTED)
