"""Reading a runner's streamed `/invoke` for a durable invocation, and what it carries over.

`Progress` is what a call has done so far — the revision it pinned, the outputs of the
steps that finished (and which of them were skipped), what unfinished steps did inside
(`forEach` elements, tool-loop turns and calls: `plnt.api.checkpoints`), the replicas that
were lost, the calls made — kept as the call activity's heartbeat details, so an attempt
on another replica or worker calls the same revision and starts from it (`completedSteps`,
`stepProgress`). The SDK's own heartbeats are throttled (what a worker killed within the
throttle interval had given it is lost), so each change of progress is also recorded at
once by `plnt.sagas.invoking.checkpointing`. The calls made are counted in status instead,
before each is sent (`invoking`, "Attempts"). The rest
reads the NDJSON stream whatever the length of its lines and turns a runner's error body
into the Invocation's failure. No I/O here beyond reading the response handed in.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from temporalio import activity
from temporalio.exceptions import ApplicationError

from plnt.api import checkpoints
from plnt.api.usage import UsageSource
from plnt.sagas.invoking import workflow as inv


def camel(error_type: str) -> str:
    """`bad_gateway` → `BadGateway`: a runner error type as a condition reason."""
    return "".join(part.capitalize() for part in error_type.split("_") if part) or "RunnerError"


MAX_CARRIED_BYTES = 1024 * 1024
"""The most finished-step output a heartbeat carries (compact JSON), well under Temporal's
2 MiB payload limit: a step whose output would go past it is not carried, so a retry
runs it again rather than the heartbeat being refused."""


@dataclass
class Progress:
    """What a call has done so far: its heartbeat details, carried across attempts.

    `add` keeps a finished step's output only while the outputs kept stay within
    `MAX_CARRIED_BYTES`.
    """

    completed: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Completed steps that were skipped: why (their trace's `skipped`)."""
    partial: dict[str, checkpoints.StepProgress] = field(default_factory=dict)
    """What steps not finished yet did inside (`plnt.api.checkpoints`), by step id."""
    lost: list[str] = field(default_factory=list)
    tries: int = 0
    """The calls made so far: this attempt's copy of `status.attempts`, which an attempt
    after the first reads back rather than trusting the heartbeat's (`invoking`)."""
    revision: int | None = None
    """The revision pinned (None until an attempt pinned one): every attempt calls it."""
    digest: str = ""
    start_time: str = ""
    """When the revision was pinned: the call's `status.startTime`."""
    carried_bytes: int = field(default=0, compare=False)

    def pinned(self, revision: int, digest: str, start_time: str) -> None:
        self.revision, self.digest, self.start_time = revision, digest, start_time

    def add(self, step: str, output: Any, *, skipped: str | None = None) -> bool:
        """Keep `step`'s output to hand back on a retry; False when it is too large to."""
        size = _size(output)
        if self.carried_bytes + size > MAX_CARRIED_BYTES:
            return False
        self.completed[step] = output
        if skipped is not None:
            self.skipped[step] = skipped
        self.carried_bytes += size
        if step in self.partial:
            self.carried_bytes -= _size(self.partial.pop(step))
        return True

    def note(self, line: dict[str, Any]) -> bool:
        """Fold a `progress` line in; False when it was not kept (not one this module
        reads, or the step's progress would take the carried outputs past the limit)."""
        folded: dict[str, checkpoints.StepProgress] = {}
        step = line.get("step")
        if isinstance(step, str) and step in self.partial:
            folded[step] = _copy(self.partial[step])
        step = checkpoints.fold(folded, line)
        if step is None:
            return False
        old = _size(self.partial[step]) if step in self.partial else 0
        new = _size(folded[step])
        if self.carried_bytes - old + new > MAX_CARRIED_BYTES:
            return False
        self.partial[step] = folded[step]
        self.carried_bytes += new - old
        return True

    @classmethod
    def of(cls, details: Any) -> Progress:
        last = details if isinstance(details, dict) else {}
        revision = last.get("revision")
        progress = cls(
            lost=[str(e) for e in last.get("lost") or []],
            tries=int(last.get("tries") or 0),
            revision=revision if isinstance(revision, int) else None,
            digest=str(last.get("digest") or ""),
            start_time=str(last.get("startTime") or ""),
        )
        completed = last.get("completed")
        skipped = last.get("skipped")
        skipped = skipped if isinstance(skipped, dict) else {}
        for step, output in (completed if isinstance(completed, dict) else {}).items():
            why = skipped.get(step)
            progress.add(str(step), output, skipped=str(why) if why is not None else None)
        partial = last.get("partial")
        for step, done in (partial if isinstance(partial, dict) else {}).items():
            if isinstance(done, dict) and step not in progress.completed:
                size = _size(done)
                if progress.carried_bytes + size <= MAX_CARRIED_BYTES:
                    progress.partial[str(step)] = done  # type: ignore[assignment]
                    progress.carried_bytes += size
        return progress

    def details(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "skipped": self.skipped,
            "partial": self.partial,
            "lost": self.lost,
            "tries": self.tries,
            "revision": self.revision,
            "digest": self.digest,
            "startTime": self.start_time,
        }

    def beat(self) -> None:
        activity.heartbeat(self.details())


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _copy(done: checkpoints.StepProgress) -> checkpoints.StepProgress:
    """A step's progress with its containers copied, so a refused fold changes nothing."""
    copied = checkpoints.StepProgress()
    if "items" in done:
        copied["items"] = dict(done["items"])
    if "failedItems" in done:
        copied["failedItems"] = list(done["failedItems"])
    if "loops" in done:
        copied["loops"] = dict(done["loops"])
    return copied


class Lost(Exception):
    """The replica went away mid-call, or could not be called: try another one.

    `sent`: False when the call never left (the connection was refused), so no runner
    received it and it is not counted as one.
    """

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


async def ndjson(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The lines of a stream, whatever their length."""
    pending = b""
    async for chunk in response.content.iter_any():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            if raw.strip():
                decoded = json.loads(raw)
                if isinstance(decoded, dict):
                    yield decoded
    if pending.strip():
        decoded = json.loads(pending)
        if isinstance(decoded, dict):
            yield decoded


def runner_failure(error: Any, status: Any) -> ApplicationError:
    """The Invocation's failure from a runner's error body (`{"message", "type", "step"…}`)."""
    body = error if isinstance(error, dict) else {}
    reason = camel(str(body.get("type") or "runner_error"))
    message = str(body.get("message") or f"the runner answered {status}")
    step = body.get("step")
    return inv.fail(reason, message, step=str(step) if step else None)


def usage(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The answer's `usage` as status keeps it, with its source (`plnt.api.usage`)."""
    usage = answer.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = (
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
    )
    total = int(usage.get("total_tokens") or prompt + completion)
    counted = usage.get("source") == UsageSource.COUNTED.value
    return {
        "promptTokens": prompt,
        "completionTokens": completion,
        "totalTokens": total,
        "source": (UsageSource.COUNTED if counted else UsageSource.REPORTED).value,
    }
