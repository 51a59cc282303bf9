"""What a resource is: names, scope, verbs, subresources, printer columns, selectable fields.

A `ResourceDefinition` is data; discovery, OpenAPI, Table printing and storage
keys are all derived from it, so adding a kind means writing one definition and
one strategy (and, when its changes deserve Events, transition rules), nothing in
the HTTP layer. `Object` and `lookup` live in `objects`, below every other registry
module; they are named here too for the callers that read a definition and its objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from plnt.api.errors import GroupResource
from plnt.registry.changes import TransitionRules
from plnt.registry.objects import Object as Object
from plnt.registry.objects import lookup as lookup
from plnt.registry.strategy import Strategy

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True, eq=False)  # by identity: a JSON schema is a dict
class Schema:
    """A named body schema for the OpenAPI documents: a pydantic model's, or (for a body
    no model describes, such as a runner's answer) a JSON schema written out."""

    name: str
    """The schema's name within the kind's group and version (`WorkflowRunRollback`)."""
    model: type[BaseModel] | None = None
    json_schema: Mapping[str, Any] | None = None
    """OpenAPI 3.0 / Swagger 2.0 as it is to be published; only without `model`."""

    def __post_init__(self) -> None:
        if (self.model is None) == (self.json_schema is None):
            raise ValueError(f"schema {self.name!r} needs exactly one of model and json_schema")


@dataclass(frozen=True, slots=True)
class Subresource:
    """A subresource such as `status`, `scale` or `invoke`, with its own response kind.

    What the generic machinery cannot derive from `kind` the kind declares here: the
    schemas of a body and of an answer that is not a kind of its own (OpenAPI), and
    whether a request lasts as long as its client or upstream wants (`long_running`,
    so it holds no max-in-flight slot). kube declares the same per storage: a
    subresource's REST storage names its request and answer types, and the server's
    LongRunningFunc names the long-running subresources.
    """

    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str | None = None
    version: str | None = None
    body: Schema | None = None
    """What a `create` (POST) takes; None: no body is documented."""
    body_required: bool = True
    answer: Schema | None = None
    """The answer's schema when it is neither the kind itself, autoscaling/v1 Scale nor a
    metav1.Status (those the generic documents know); its name is `kind`'s."""
    long_running: bool = False
    """Every request lasts as long as its client or upstream wants (an invocation, a relay)."""
    long_running_when_watched: bool = False
    """A GET with `?watch=` streams until the client leaves."""

    def __post_init__(self) -> None:
        if self.answer is not None and self.answer.name != self.kind:
            raise ValueError(
                f"the answer of {self.name!r} is a {self.kind}, not {self.answer.name}"
            )


VIEWERS = "plnt:viewers"
"""The group the standalone default policy lets read what each kind grants it."""
INVOKERS = "plnt:invokers"
"""The group the standalone default policy lets run (not edit) what each kind grants it."""
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True, slots=True)
class Grant:
    """What a group may do to this kind in the standalone default policy.

    The kind's share of plnt's standing roles, as a CRD ships ClusterRoles labelled
    `rbac.authorization.k8s.io/aggregate-to-view` (…-edit) that kube's controller folds
    into its `view` and `edit` roles: the policy (`plnt.apiserver.authz`) adds every
    kind's grants to its own rules, so it names no kind.
    """

    group: str
    """A user group (`VIEWERS`, `INVOKERS`)."""
    verbs: tuple[str, ...]
    parts: tuple[str, ...]
    """"" for the resource itself, otherwise a subresource's name (a bare resource does not
    grant its subresources)."""


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """A Table column; `priority` > 0 shows only with `-o wide`."""

    name: str
    type: str
    description: str
    cell: Callable[[Object], Any]
    format: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class ResourceDefinition:
    """Everything the generic machinery needs to serve one resource."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    model: type[BaseModel]
    strategy: Strategy
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STANDARD_VERBS
    subresources: tuple[Subresource, ...] = ()
    columns: tuple[PrinterColumn, ...] = ()
    field_labels: Callable[[Object], Mapping[str, str]] = field(
        default=lambda obj: {}  # replaced per kind; metadata fields are always added
    )
    description: str = ""
    grants: tuple[Grant, ...] = ()
    """The kind's share of the standalone default policy (see `Grant`)."""
    transitions: TransitionRules | None = None
    """Which Events a stored change deserves (see `plnt.registry.changes`); None: no Events."""
    builtin: bool = False
    """A kind compiled into kube-apiserver (core/v1 Events, Namespaces), not a custom resource.

    kube decodes a built-in kind with the URL's group, version and kind as the decoder's
    defaults, so a body that names neither `apiVersion` nor `kind` is accepted (kopf and
    client-go's event recorders send such bodies); a custom resource's body must name its
    kind. `plnt.registry.typemeta` applies the difference."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> GroupResource:
        return GroupResource(self.group, self.plural)

    @property
    def qualified_kind(self) -> str:
        """`WorkflowRun.plnt.work`, the prefix of Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def has_status(self) -> bool:
        return any(s.name == "status" for s in self.subresources)

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    def key_prefix(self, namespace: str = "") -> str:
        """Storage prefix: `/<group>/<plural>/[<namespace>/]`, under the store's own root."""
        base = f"/{self.group or 'core'}/{self.plural}/"
        return f"{base}{namespace}/" if namespace else base

    def key(self, namespace: str, name: str) -> str:
        return (
            f"{self.key_prefix(namespace)}{name}"
            if self.namespaced
            else f"{self.key_prefix()}{name}"
        )

    def selectable_fields(self, obj: Object) -> dict[str, str]:
        """Field-selector values: metadata.name/namespace plus the kind's own fields."""
        meta = obj.get("metadata", {})
        fields = {"metadata.name": meta.get("name", "")}
        if self.namespaced:
            fields["metadata.namespace"] = meta.get("namespace", "")
        fields.update(self.field_labels(obj))
        return fields

    def selectable_field_names(self) -> frozenset[str]:
        """Field names a selector may use (derived from an empty object)."""
        return frozenset(self.selectable_fields({"metadata": {}}))
