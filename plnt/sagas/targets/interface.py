"""The `Target` protocol and the values it exchanges with the saga.

Values are plain frozen dataclasses of JSON-friendly fields, because activities pass
them through Temporal's data converter.

Errors: `TargetError` (base), `InstallFailed` (replicas did not become ready by the
deadline; the message carries the runner's last log lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from plnt.api.workflowruns import StepCacheSpec


class TargetError(Exception):
    """A target operation failed; the message is meant for a human."""


class InstallFailed(TargetError):
    """Replicas of a revision did not become ready."""


class CredentialsMissing(TargetError):
    """The backend's credentials reference names a secret the target cannot find."""


@dataclass(frozen=True)
class RunKey:
    """One WorkflowRun, by identity: a recreated object with the same name is a new run."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class SecretKeyRef:
    """One key of a Secret (a PlntBackend's `credentialsRef`); the target finds its value."""

    name: str
    key: str


@dataclass(frozen=True)
class BackendConfig:
    """The resolved inference backend, as the runner's backend config takes it."""

    name: str | None = None
    type: str = "echo"
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    latency_ms: float | None = None
    credentials: SecretKeyRef | None = None


@dataclass(frozen=True)
class CacheConfig:
    """The runner's step cache settings (spec.cache); `of()` fills in the API's defaults."""

    enabled: bool
    ttl_seconds: float
    max_entries: int

    @classmethod
    def of(cls, spec: StepCacheSpec | None = None) -> CacheConfig:
        spec = spec if spec is not None else StepCacheSpec()
        return cls(spec.enabled, float(spec.ttl_seconds), spec.max_entries)


@dataclass(frozen=True)
class Revision:
    """Everything needed to run one revision of a run."""

    run: RunKey
    revision: int
    digest: str
    spec: bytes
    backend: BackendConfig = field(default_factory=BackendConfig)
    replicas: int = 1
    cache: CacheConfig = field(default_factory=CacheConfig.of)


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

    async def replicas(self, run: RunKey, revision: int) -> list[Replica]:
        """The revision's live replicas with their current readiness."""
        ...

    async def revisions(self, run: RunKey) -> list[int]:
        """Revisions of `run` that have any live replica."""
        ...

    async def retire(self, run: RunKey, revision: int) -> None:
        """Stop every replica of `revision` and forget it (no-op when none)."""
        ...

    async def teardown(self, run: RunKey) -> None:
        """Stop every replica of every revision of `run` and remove its state."""
        ...
