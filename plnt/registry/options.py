"""Options and results of resource operations: parsed query parameters in, objects out.

Plain data shared by the HTTP layer (which parses requests into these) and the
registry (which acts on them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from plnt.registry.fieldselectors import FieldSelector
from plnt.registry.objects import Object
from plnt.registry.selectors import LabelSelector


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asks for a write, as admission sees it (k8s.io/apiserver's user.Info): the HTTP
    layer fills it from the authenticated user, so an admission hook can ask whether that
    user may do something more (`hooks.ObjectAdmission`)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Per-request write options (query parameters of create/update/patch/delete), and who
    asks (`requester`, None for writes no user made, such as a controller's)."""

    dry_run: bool = False
    field_validation: str = "Warn"
    field_manager: str = ""
    duplicates: tuple[str, ...] = ()
    is_patch: bool = False
    force: bool = False
    """Server-side apply only: take over fields other managers own instead of a 409."""
    requester: Requester | None = None


@dataclass(frozen=True, slots=True)
class AgentWarning:
    """A warning that names who gives it: `Warning: 299 <agent> "<text>"`.

    A plain string is a warning as kube's apiserver gives them (agent `-`); plnt's own
    runtime (the deploy hooks) names itself.
    """

    agent: str
    text: str


Warnings = list[str | AgentWarning]
"""A write's warnings, in the order they go out as `Warning` headers."""


@dataclass(slots=True)
class WriteResult:
    """A written object, whether it was created, and the warnings to send back.

    `warnings` are the write's own (field validation, the kind's advice) followed by
    those its after-write hooks returned.
    """

    object: Object
    created: bool = False
    warnings: Warnings = field(default_factory=list)
    previous: Object | None = None


@dataclass(frozen=True, slots=True)
class ListOptions:
    """Parsed list/watch query parameters."""

    label_selector: LabelSelector | None = None
    field_selector: FieldSelector | None = None
    limit: int = 0
    continue_token: str | None = None
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: int | None = None
    """Watch only: end the stream after this long (None or 0: the server's default)."""
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    """Watch only: None when the client did not say (the resourceVersion rules decide)."""


@dataclass(frozen=True, slots=True)
class ListPage:
    """Items of one page and the list metadata."""

    items: list[Object]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """Parsed DeleteOptions (body or query)."""

    dry_run: bool = False
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None


def has_filters(options: ListOptions) -> bool:
    """True when a label or field selector narrows the list or watch."""
    return bool(
        (options.label_selector is not None and not options.label_selector.empty())
        or (options.field_selector is not None and not options.field_selector.empty())
    )
