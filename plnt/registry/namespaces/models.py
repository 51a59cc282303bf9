"""Wire models of core/v1 Namespace and Service, as much of them as plnt serves.

They live with the registry package rather than in `plnt.api` because only standalone
plnt serves them; clients of plnt's own API never need them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from plnt.api.base import WireModel
from plnt.api.meta import ObjectMeta


class NamespaceSpec(WireModel):
    """What must happen before a namespace may be removed from storage."""

    finalizers: list[str] | None = Field(
        default=None,
        description="Finalizers the namespace controller removes once the content is gone.",
    )


class NamespaceCondition(WireModel):
    """One observation of the namespace controller while it deletes the content."""

    type: str
    status: str
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class NamespaceStatus(WireModel):
    """Active, or Terminating while the namespace's content is being deleted."""

    phase: Literal["Active", "Terminating"] | None = None
    conditions: list[NamespaceCondition] | None = None


class Namespace(WireModel):
    """core/v1 Namespace: a scope for names, removed with everything in it."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


class Service(WireModel):
    """core/v1 Service; standalone plnt has none, the model only types the empty list."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Service"] = "Service"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
