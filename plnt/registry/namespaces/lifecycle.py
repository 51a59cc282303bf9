"""kube's NamespaceLifecycle admission, where every create of a namespaced object passes.

Rules (plugin/pkg/admission/namespace/lifecycle):

* nothing may be created in a namespace that is Terminating: 403 Forbidden, `unable to
  create new content in namespace X because it is being terminated`, with a
  `NamespaceTerminating` cause on `metadata.namespace`;
* nothing may be created or changed in a namespace that does not exist: 404
  `namespaces "X" not found` (the cached view first, then a consistent read, so a
  namespace created a moment ago is found);
* deletes are always allowed.

The check wraps the storage of each namespaced `ResourceStore` (`LifecycleStorage`),
not the HTTP handler, because the object's name is known only once the body is decoded,
and because plnt writes some objects without HTTP (its Event recorder): those must be
refused in a Terminating namespace too, or they would outlive it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from plnt.api import errors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.namespaces.store import NamespaceStore
from plnt.registry.namespaces.strategy import TERMINATING, phase
from plnt.storage.interface import KeyValue, ListResult, Store, WatchEvent

NAMESPACES = errors.GroupResource("", "namespaces")


class LifecycleStorage:
    """The storage of one namespaced resource, refusing what NamespaceLifecycle refuses."""

    def __init__(
        self, inner: Store, definition: ResourceDefinition, namespaces: NamespaceStore
    ) -> None:
        self.inner = inner
        self._definition = definition
        self._namespaces = namespaces
        self._prefix = definition.key_prefix()

    def _split(self, key: str) -> tuple[str, str]:
        namespace, _, name = key[len(self._prefix) :].partition("/")
        return namespace, name

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

    async def admit_create(self, key: str) -> None:
        namespace, name = self._split(key)
        if await self._namespace_phase(namespace) != TERMINATING:
            return
        why = (
            f"unable to create new content in namespace {namespace} because it is being terminated"
        )
        subject = str(self._definition.group_resource)
        if name:
            subject = f'{subject} "{name}"'
        raise errors.Forbidden(
            f"{subject} is forbidden: {why}",
            name=name,
            group=self._definition.group,
            kind=self._definition.plural,
            causes=[
                errors.Cause(
                    "NamespaceTerminating",
                    f"namespace {namespace} is being terminated",
                    "metadata.namespace",
                )
            ],
        )

    async def create(self, key: str, value: bytes) -> KeyValue:
        await self.admit_create(key)
        return await self.inner.create(key, value)

    async def get(self, key: str, *, consistent: bool = True) -> KeyValue:
        return await self.inner.get(key, consistent=consistent)

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        revision: int = 0,
        consistent: bool = True,
    ) -> ListResult:
        return await self.inner.list(
            prefix,
            limit=limit,
            continue_token=continue_token,
            revision=revision,
            consistent=consistent,
        )

    async def guaranteed_update(
        self,
        key: str,
        mutate: Callable[[KeyValue], bytes | None],
        *,
        expected_revision: int = 0,
    ) -> KeyValue:
        await self._namespace_phase(self._split(key)[0])
        return await self.inner.guaranteed_update(key, mutate, expected_revision=expected_revision)

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        return await self.inner.delete(key, expected_revision=expected_revision)

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        progress_interval: float | None = None,
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        return self.inner.watch(
            prefix, after_revision=after_revision, progress_interval=progress_interval
        )

    async def current_revision(self) -> int:
        return await self.inner.current_revision()
