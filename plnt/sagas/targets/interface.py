"""The `Target` protocol and the values it exchanges with the saga.

Values are plain frozen dataclasses. What a revision needs (`Revision`, `BackendConfig`,
`SecretKeyRef`, `CacheConfig`) is defined once in `runners`, which also renders it as the
Kubernetes target's chart values; this module re-exports it, and `RunRef`, the run
reference the saga's history carries too (`plnt.sagas.values`).

Errors: `TargetError` (base), `InstallFailed` (replicas did not become ready by the
deadline; the message carries the runner's last log lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from plnt.sagas.targets.runners import BackendConfig as BackendConfig
from plnt.sagas.targets.runners import CacheConfig as CacheConfig
from plnt.sagas.targets.runners import Revision as Revision
from plnt.sagas.targets.runners import SecretKeyRef as SecretKeyRef
from plnt.sagas.values import RouteBackend
from plnt.sagas.values import RunRef as RunRef


class TargetError(Exception):
    """A target operation failed; the message is meant for a human."""


class InstallFailed(TargetError):
    """Replicas of a revision did not become ready."""


class InsufficientCapacity(TargetError):
    """No pool has room for the revision's replicas; nothing was installed."""


class CredentialsMissing(TargetError):
    """The backend's credentials reference names a secret the target cannot find."""


@dataclass(frozen=True)
class Replica:
    """One runner replica of a revision."""

    revision: int
    index: int
    url: str
    ready: bool
    pid: int | None = None


class Target(Protocol):
    """Makes, finds, resizes and removes the replicas of a run's revisions."""

    async def install(
        self, revision: Revision, *, heartbeat: Callable[[Any], None] | None = None
    ) -> list[Replica]:
        """Ensure `revision.replicas` ready replicas of `revision`; adopt live ones."""
        ...

    async def scale(
        self, revision: Revision, *, heartbeat: Callable[[Any], None] | None = None
    ) -> list[Replica]:
        """Make the revision's replica count `revision.replicas` (stop extras, add missing)."""
        ...

    async def replicas(self, run: RunRef, revision: int) -> list[Replica]:
        """The revision's live replicas with their current readiness."""
        ...

    async def revisions(self, run: RunRef) -> list[int]:
        """Revisions of `run` that have any live replica."""
        ...

    async def retire(self, run: RunRef, revision: int) -> None:
        """Stop every replica of `revision` and forget it (no-op when none)."""
        ...

    async def teardown(self, run: RunRef) -> None:
        """Stop every replica of every revision of `run` and remove its state."""
        ...

    async def start(self) -> None:
        """Get ready before the first request (e.g. pre-warm what starts replicas)."""
        ...

    async def close(self) -> None:
        """Release what the target holds itself; replicas keep running."""
        ...


@runtime_checkable
class Router(Protocol):
    """A target that also sends applications' traffic to revisions (the Kubernetes
    target's Gateway API HTTPRoute; see `routes`)."""

    def route_of(self, run: RunRef, spec: dict[str, Any] | None) -> str | None:
        """`NAMESPACE/NAME` of the run's route for its `spec.route`, or None (no route)."""
        ...

    async def route(
        self, run: RunRef, spec: dict[str, Any] | None, backends: list[RouteBackend]
    ) -> str:
        """Set the route's weights to `backends` (none: remove it); what was done."""
        ...
