"""What a resource is: names, scope, verbs, subresources, printer columns, selectable fields.

A `ResourceDefinition` is data; discovery, OpenAPI, Table printing and storage
keys are all derived from it, so adding a kind means writing one definition and
one strategy (and, when its changes deserve Events, transition rules), nothing in
the HTTP layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from plnt.api.errors import GroupResource

if TYPE_CHECKING:
    from plnt.registry.changes import TransitionRules
    from plnt.registry.strategy import Strategy

Object = dict[str, Any]


def lookup(obj: Object, *path: str) -> Any:
    """The value at `path` in a JSON object, or None where any step is missing or not a map.

    Printer columns and field selectors read optional nested fields of
    unvalidated-looking data with it, never raising.
    """
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Subresource:
    """A subresource such as `status`, `scale` or `invoke`, with its own response kind."""

    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str | None = None
    version: str | None = None


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
