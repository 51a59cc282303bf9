"""What a composition root may add to a `ResourceStore`'s writes, and where each runs.

The store fixes the order of a write (`admitting`: identity, field validation, the
strategy's prepare, validation, warnings, canonicalisation, managedFields); the hooks
here are the two places where code outside the registry's rules takes part, given to the
store when it is built, so the store never calls back into a subclass:

* `Admission` runs before the object's storage key is built, so before anything is read
  or written under it (a dry run included): on create once the name is known (generated
  or not), on update first of all. It refuses by raising an API error. Standalone plnt's
  NamespaceLifecycle (`plnt.registry.namespaces.lifecycle`) is one.

Protocols only; no I/O here.
"""

from __future__ import annotations

from typing import Protocol

from plnt.registry.definitions import ResourceDefinition


class Admission(Protocol):
    """Refuses writes for reasons of its own, before the store looks at storage."""

    async def admit_create(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        """Raise the API error that refuses creating `name`; return when it may be created."""
        ...

    async def admit_update(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        """Raise the API error that refuses changing `name`; return when it may change."""
        ...
