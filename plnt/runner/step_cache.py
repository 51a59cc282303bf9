"""The content-addressed step cache: bounded (LRU) and expiring (TTL).

A key is the sha256 of everything that determines a step's output: the step definition, its
resolved request (rendered messages, URL, body … which already include the inputs and
upstream outputs it used), the backend identity and the model. Two invocations that would
send the same request share the answer; changing any of these makes a new key. The clock is
injectable so expiry is tested without waiting.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def cache_key(*, step: dict[str, Any], resolved: Any, backend: str, model: str | None) -> str:
    """sha256 (hex) of the canonical JSON of the step, its resolved request, backend, model."""
    document = {"step": step, "resolved": resolved, "backend": backend, "model": model}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class _Entry:
    value: Any
    expires_at: float


class StepCache:
    """An LRU map from key to step output whose entries expire `ttl_seconds` after writing."""

    def __init__(
        self,
        *,
        max_entries: int,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> tuple[bool, Any]:
        """(True, value) on a live hit; (False, None) on a miss or an expired entry."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_at <= self._clock():
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return False, None
        self._entries.move_to_end(key)
        self.hits += 1
        return True, entry.value

    def put(self, key: str, value: Any) -> None:
        """Store `value`, evicting the least recently used entries beyond the bound."""
        if self.max_entries <= 0:
            return
        self._entries[key] = _Entry(value, self._clock() + self.ttl_seconds)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
