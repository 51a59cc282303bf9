"""Namespace's definition (cluster-scoped, `ns`, finalize and status subresources), and the
read-only, always empty `services` that `kubectl cluster-info` lists.

kube prints namespaces as NAME STATUS AGE. `kubectl cluster-info` lists the Services
of kube-system labelled `kubernetes.io/cluster-service=true` and prints the control
plane line only once that list succeeds; standalone plnt runs no such service, so the
honest answer is an empty list, and every write is refused.
"""

from __future__ import annotations

from plnt.registry.definitions import PrinterColumn, ResourceDefinition, Subresource
from plnt.registry.namespaces.models import Namespace, Service
from plnt.registry.namespaces.strategy import NamespaceStrategy, phase
from plnt.registry.readonly import ReadOnlyStore
from plnt.registry.strategy import Strategy

DEFINITION = ResourceDefinition(
    group="",
    version="v1",
    kind="Namespace",
    plural="namespaces",
    singular="namespace",
    model=Namespace,
    strategy=NamespaceStrategy(model=Namespace),
    namespaced=False,
    short_names=("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources=(
        Subresource("finalize", "Namespace", ("update",)),
        Subresource("status", "Namespace", ("get", "patch", "update")),
    ),
    columns=(
        PrinterColumn("Status", "string", "The status of the namespace.", lambda o: phase(o)),
    ),
    field_labels=lambda obj: {"status.phase": phase(obj)},
    description="A scope for names; deleting it deletes everything in it.",
    builtin=True,
)

SERVICES = ResourceDefinition(
    group="",
    version="v1",
    kind="Service",
    plural="services",
    singular="service",
    model=Service,
    strategy=Strategy(model=Service),
    short_names=("svc",),
    verbs=("get", "list", "watch"),
    description="Standalone plnt runs no Services: the list is always empty.",
    builtin=True,
)


class ServiceListStore(ReadOnlyStore):
    """Reads of an empty collection; every write is 405 (the verbs discovery lists)."""
