"""meta.k8s.io/v1 types that plnt objects and responses carry.

Types follow k8s.io/apimachinery/pkg/apis/meta/v1 field for field, as far as
plnt uses them; `resourceVersion` is always a string and timestamps are RFC 3339
in UTC, because client-go's unstructured accessors silently drop other shapes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from plnt.api.base import WireModel


def format_time(moment: datetime) -> str:
    """RFC 3339 with second precision and a Z suffix, as Go's metav1.Time marshals."""
    utc = moment.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"
    )


_last_second: list[tuple[int, str]] = [(-1, "")]


def now_rfc3339() -> str:
    """The current time in the wire format of metav1.Time.

    Every write stamps a time with second precision, so the text is made once per
    second (a one-entry memo; strftime-like formatting showed up in profiles).
    """
    second = int(time.time())
    memo = _last_second[0]
    if memo[0] != second:
        memo = (second, format_time(datetime.fromtimestamp(second, UTC)))
        _last_second[0] = memo
    return memo[1]


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp written by `format_time` (or any ISO 8601 with offset)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class OwnerReference(WireModel):
    """A pointer to an owning object, kept for garbage collection semantics."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(WireModel):
    """Metadata every persisted object carries."""

    name: str | None = Field(default=None, description="Unique name within the namespace.")
    generate_name: str | None = Field(
        default=None, description="Prefix the server uses to generate a unique name on create."
    )
    namespace: str | None = Field(default=None, description="The namespace of the object.")
    uid: str | None = Field(default=None, description="Unique identifier set by the server.")
    resource_version: str | None = Field(
        default=None, description="Opaque version for optimistic concurrency (etcd revision)."
    )
    generation: int | None = Field(
        default=None, description="Sequence number of spec changes, set by the server."
    )
    creation_timestamp: str | None = Field(default=None, description="When the object was created.")
    deletion_timestamp: str | None = Field(
        default=None, description="When deletion was requested, while finalizers remain."
    )
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = Field(default=None, description="Labels for selection.")
    annotations: dict[str, str] | None = Field(default=None, description="Free-form annotations.")
    finalizers: list[str] | None = Field(
        default=None, description="Keys that must be removed before the object is deleted."
    )
    owner_references: list[OwnerReference] | None = None
    managed_fields: list[dict[str, Any]] | None = None


class ListMeta(WireModel):
    """Metadata of a list response."""

    resource_version: str | None = None
    continue_: str | None = Field(default=None, alias="continue")
    remaining_item_count: int | None = None


class StatusCause(WireModel):
    """One reason a request failed; on the wire the type field is named `reason`."""

    reason: str | None = None
    message: str | None = None
    field: str | None = None


class StatusDetails(WireModel):
    """Which object a Status is about and why."""

    name: str | None = None
    group: str | None = None
    kind: str | None = None
    uid: str | None = None
    causes: list[StatusCause] | None = None
    retry_after_seconds: int | None = None


class Status(WireModel):
    """metav1.Status: the body of every error response (and of some successes)."""

    kind: Literal["Status"] = "Status"
    api_version: Literal["v1"] = "v1"
    metadata: ListMeta = Field(default_factory=ListMeta)
    status: Literal["Success", "Failure"] = "Failure"
    message: str | None = None
    reason: str | None = None
    details: StatusDetails | None = None
    code: int | None = None


class Condition(WireModel):
    """metav1.Condition, the shape `kubectl wait --for=condition=...` reads."""

    type: str = Field(description="Condition type, e.g. Ready, Progressing, Degraded.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this condition was computed from."
    )
    last_transition_time: str | None = Field(
        default=None, description="When the status last changed."
    )
    reason: str = Field(default="", description="CamelCase reason a program can act on.")
    message: str = Field(default="", description="What a human should know or do.")


class LabelSelectorRequirement(WireModel):
    """One set-based label requirement."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(WireModel):
    """metav1.LabelSelector: matchLabels AND matchExpressions."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None
