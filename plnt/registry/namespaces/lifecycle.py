"""kube's NamespaceLifecycle admission, which every create or update of a namespaced object passes.

Rules (plugin/pkg/admission/namespace/lifecycle):

* nothing may be created in a namespace that is Terminating: 403 Forbidden, `unable to
  create new content in namespace X because it is being terminated`, with a
  `NamespaceTerminating` cause on `metadata.namespace`;
* nothing may be created or changed in a namespace that does not exist: 404
  `namespaces "X" not found` (the cached view first, then a consistent read, so a
  namespace created a moment ago is found);
* deletes are always allowed.

`NamespaceLifecycle` is an admission hook (`plnt.registry.hooks.Admission`) the
composition root gives each namespaced `ResourceStore`, not a check in the HTTP handler,
because the object's name is known only once the body is decoded, and because plnt
writes some objects without HTTP (its Event recorder): those must be refused in a
Terminating namespace too, or they would outlive it. The store runs it before it builds
the object's key, so a dry run is refused as the write would be, and before the name's
existence is looked at.
"""

from __future__ import annotations

from plnt.api import errors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.namespaces.store import NamespaceStore
from plnt.registry.namespaces.strategy import TERMINATING, phase

NAMESPACES = errors.GroupResource("", "namespaces")


class NamespaceLifecycle:
    """Refuses what NamespaceLifecycle refuses, for every namespaced store it is given to."""

    def __init__(self, namespaces: NamespaceStore) -> None:
        self._namespaces = namespaces

    async def _namespace_phase(self, namespace: str) -> str:
        """The namespace's phase; 404 for a namespace that does not exist."""
        try:
            obj = await self._namespaces.get("", namespace, resource_version="0")
        except errors.NotFound:
            try:
                obj = await self._namespaces.get("", namespace)
            except errors.NotFound as error:
                raise errors.NotFound.of(NAMESPACES, namespace) from error
        return phase(obj)

    async def admit_create(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        if await self._namespace_phase(namespace) != TERMINATING:
            return
        why = (
            f"unable to create new content in namespace {namespace} because it is being terminated"
        )
        subject = str(definition.group_resource)
        if name:
            subject = f'{subject} "{name}"'
        raise errors.Forbidden(
            f"{subject} is forbidden: {why}",
            name=name,
            group=definition.group,
            kind=definition.plural,
            causes=[
                errors.Cause(
                    "NamespaceTerminating",
                    f"namespace {namespace} is being terminated",
                    "metadata.namespace",
                )
            ],
        )

    async def admit_update(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        del definition, name  # any change is allowed while the namespace exists
        await self._namespace_phase(namespace)
