"""core/v1 Namespace (and the empty, read-only Service list) as standalone plnt serves them.

Pure resource semantics over the generic store: the definition, a strategy that keeps
`spec.finalizers` and `status` as kube's does, and `NamespaceStore`, whose delete marks
a namespace Terminating until its content is gone. The controller that empties a
Terminating namespace lives in the API server (`plnt.apiserver.namespaces`).
"""

from __future__ import annotations

from plnt.registry.namespaces.definition import DEFINITION, SERVICES, ServiceListStore
from plnt.registry.namespaces.store import IMMORTAL, INITIAL, NamespaceStore
from plnt.registry.namespaces.strategy import KUBERNETES_FINALIZER

__all__ = [
    "DEFINITION",
    "IMMORTAL",
    "INITIAL",
    "KUBERNETES_FINALIZER",
    "SERVICES",
    "NamespaceStore",
    "ServiceListStore",
]
