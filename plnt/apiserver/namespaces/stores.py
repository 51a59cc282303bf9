"""The resource stores of a standalone server, for the composition root (`app.build_app`).

Standalone plnt serves core/v1 Namespaces itself, so its stores differ from a cluster
replica's: the Namespace store, the empty Service list kubectl asks for, and every
namespaced kind admitted by NamespaceLifecycle (a registry admission hook: no object in
a namespace that does not exist or is Terminating), which runs before the key is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from plnt.registry import namespaces
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.hooks import Admission
from plnt.registry.namespaces.lifecycle import NamespaceLifecycle
from plnt.registry.store import ResourceStore
from plnt.storage.interface import Store


def standalone_stores(
    definitions: Sequence[ResourceDefinition],
    storage: Store,
    make: Callable[[ResourceDefinition, Store, Sequence[Admission]], ResourceStore],
) -> dict[tuple[str, str], ResourceStore]:
    """The stores of a standalone server: Namespaces and the empty Service list of their
    own kinds, and every other resource made by `make`, the namespaced ones admitted by
    NamespaceLifecycle."""
    namespace_store = namespaces.NamespaceStore(storage)
    lifecycle = NamespaceLifecycle(namespace_store)
    stores: dict[tuple[str, str], ResourceStore] = {}
    for d in definitions:
        if d is namespaces.DEFINITION:
            store: ResourceStore = namespace_store
        elif d is namespaces.SERVICES:
            store = namespaces.ServiceListStore(d, storage)
        elif d.namespaced:
            store = make(d, storage, (lifecycle,))
        else:
            store = make(d, storage, ())
        stores[(d.group, d.plural)] = store
    return stores
