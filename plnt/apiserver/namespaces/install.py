"""Namespace and Service, as the composition root installs them: a `KindInstall` each.

Standalone plnt serves core/v1 Namespaces itself: the Namespace store (whose delete
marks a namespace Terminating), NamespaceLifecycle on every namespaced kind's store (no
object in a namespace that does not exist or is Terminating; an admission that runs
before the key is built), kubectl's protobuf create and the controller that empties a
Terminating namespace; and the empty Service list `kubectl cluster-info` reads. Under
`plnt serve` the cluster serves both kinds, and the Namespace install only answers a
namespace lookup as Active (`routes`).
"""

from __future__ import annotations

from plnt.apiserver import kinds
from plnt.apiserver.namespaces import controller, routes
from plnt.registry import namespaces
from plnt.registry.hooks import Admission
from plnt.registry.namespaces.lifecycle import NamespaceLifecycle
from plnt.registry.store import ResourceStore


def _namespace_store(storing: kinds.Storing) -> ResourceStore:
    return namespaces.NamespaceStore(storing.storage)


def _lifecycle(store: ResourceStore) -> Admission:
    assert isinstance(store, namespaces.NamespaceStore)  # built by `_namespace_store`
    return NamespaceLifecycle(store)


def _services_store(storing: kinds.Storing) -> ResourceStore:
    return namespaces.ServiceListStore(storing.definition, storing.storage)


def _setup(composing: kinds.Composing) -> None:
    routes.add_routes(composing.app, standalone=composing.standalone)


INSTALL = kinds.KindInstall(
    definition=namespaces.DEFINITION,
    standalone_only=True,
    store=_namespace_store,
    admits_namespaced=_lifecycle,
    setup=_setup,
    contexts=(controller.controller_context,),
)

SERVICES_INSTALL = kinds.KindInstall(
    definition=namespaces.SERVICES,
    standalone_only=True,
    store=_services_store,
)
"""The empty, read-only Service list of standalone plnt."""
