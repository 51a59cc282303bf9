"""What one successful write did to an object, and the Events a kind's rules derive from it.

`ResourceStore` describes every write that reached storage (create, update — which covers
PUT, PATCH, server-side apply and every subresource — and delete) as one `Change`, and
hands it to its after-write step (Events, then `hooks.AfterWrite`). A kind's definition
supplies `TransitionRules`, pure functions from a `Change` to the `Transition`s worth an
Event, so the same transition gives the same Event whichever HTTP path made it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plnt.registry.objects import Object


def _meta(obj: Object | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def generation(obj: Object | None) -> int:
    """`metadata.generation`, 0 when absent (there is no object yet)."""
    return int(_meta(obj).get("generation") or 0)


@dataclass(frozen=True, slots=True)
class Change:
    """One stored write: the object before it (None for a create) and after it.

    `gone`: the write removed the object from storage (a delete without finalizers, or
    the update that removed the last finalizer of an object being deleted); `after` is
    then the last stored state.
    """

    before: Object | None
    after: Object
    gone: bool = False

    @property
    def created(self) -> bool:
        return self.before is None

    @property
    def generation_changed(self) -> bool:
        return self.before is not None and generation(self.after) != generation(self.before)

    @property
    def deletion_started(self) -> bool:
        """deletionTimestamp newly set: the object waits for its finalizers."""
        return bool(_meta(self.after).get("deletionTimestamp")) and not _meta(self.before).get(
            "deletionTimestamp"
        )


@dataclass(frozen=True, slots=True)
class Transition:
    """One Event to record: Normal or Warning, a CamelCase reason, a human message."""

    type: str
    reason: str
    message: str


TransitionRules = Callable[[Change], Sequence[Transition]]
"""A kind's rules: which Events a change deserves (pure, no I/O)."""


class EventSink(Protocol):
    """Where a store's Events go (`plnt.registry.events.EventRecorder`): it is handed each
    stored change with the kind's rules and derives the Events itself, after the answer."""

    def record_change(self, change: Change, rules: TransitionRules) -> None: ...
