"""What a composition root may add to a `ResourceStore`'s writes, and where each runs.

The store fixes the order of a write (`admitting`: identity, field validation, the
strategy's prepare, validation, warnings, canonicalisation, managedFields); the hooks
here are the places where code outside the registry's rules takes part, given to the
store when it is built, so the store never calls back into a subclass:

* `Admission` runs before the object's storage key is built, so before anything is read
  or written under it (a dry run included): on create once the name is known (generated
  or not), on update first of all. It refuses by raising an API error. Standalone plnt's
  NamespaceLifecycle (`plnt.registry.namespaces.lifecycle`) is one.
* `ObjectAdmission` runs on create once the object is admitted by the kind's own rules
  (validated, defaulted) and the `Admission` hooks passed, before storage (a dry run
  included). It sees the object and who asks (`WriteOptions.requester`), as kube's
  admission plugins do: it refuses by raising an API error, and may set metadata the
  server owns (an owner reference). The API server's Invocation admission is one (may
  this user also invoke the run named; the run's ownerReference).
* `AfterWrite` runs once after each write that reached storage (never a dry run),
  before the answer, whatever HTTP path made it: create, update (PUT, PATCH, apply,
  `/scale`, `/rollback`, the last finalizer removed) and delete (marked or removed).
  The store first hands the change to its Event sink (the kind's transition Events,
  derived and written after the answer), then calls its after-write
  hooks in order. A hook cannot undo the write; what it wants the client to know it
  returns as warnings, which the store adds to the write's result (`WriteResult.warnings`,
  or the `warnings` list a delete is given). The API server's WorkflowRun deploy hooks
  are one (they start or signal the run's saga).

Protocols only; no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from plnt.registry.changes import Change
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import AgentWarning, Requester


class Admission(Protocol):
    """Refuses writes for reasons of its own, before the store looks at storage."""

    async def admit_create(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        """Raise the API error that refuses creating `name`; return when it may be created."""
        ...

    async def admit_update(self, definition: ResourceDefinition, namespace: str, name: str) -> None:
        """Raise the API error that refuses changing `name`; return when it may change."""
        ...


class ObjectAdmission(Protocol):
    """Admits the object a create is about to store, knowing who asks."""

    async def admit_new(
        self,
        definition: ResourceDefinition,
        obj: Object,
        *,
        requester: Requester | None,
        dry_run: bool,
    ) -> None:
        """Raise the API error that refuses `obj`; return (having set any server-owned
        metadata on it) when it may be stored."""
        ...


class AfterWrite(Protocol):
    """Reacts to a stored write before it is answered; returns warnings for the answer."""

    async def after_write(self, change: Change) -> Sequence[str | AgentWarning]:
        """React to `change` (it is stored: do not raise to refuse it); [] when all went well."""
        ...
