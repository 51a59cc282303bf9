"""A resource store whose objects are read through the API and never written through it.

kube-apiserver answers a verb a resource does not serve with 405 MethodNotAllowed. The
generic dispatcher already refuses verbs a kind does not declare; this store gives the
same answer to any other caller (a handler, a test, code in-process), so a read-only kind
cannot be written by going around the dispatcher. Reads are a `ResourceStore`'s.
"""

from __future__ import annotations

from typing import Any

from plnt.api import errors
from plnt.registry.options import WriteResult
from plnt.registry.store import ResourceStore


class ReadOnlyStore(ResourceStore):
    """Every write is kube's 405 for that verb; get, list and watch as any store."""

    def _refuse(self, verb: str) -> errors.MethodNotSupported:
        return errors.MethodNotSupported.of(self.definition.group_resource, verb)

    async def create(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("create")

    async def update(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("update")

    async def apply(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("patch")

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("delete")

    async def delete_collection(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("deletecollection")
