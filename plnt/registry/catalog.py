"""Every resource plnt serves, in discovery order.

Standalone plnt also serves the core/v1 resources a cluster would otherwise provide
(Namespaces, and the empty Service list `kubectl cluster-info` reads); under
`plnt serve` those come from kube-apiserver, so they are not served there.
"""

from __future__ import annotations

from plnt.registry import events, invocations, namespaces, plntbackends, workflowruns, workflows
from plnt.registry.definitions import ResourceDefinition

PLNT_RESOURCES: tuple[ResourceDefinition, ...] = (
    workflowruns.DEFINITION,
    plntbackends.DEFINITION,
    invocations.DEFINITION,
    workflows.DEFINITION,
)
IN_MEMORY: tuple[ResourceDefinition, ...] = (workflows.DEFINITION,)
"""Served from memory, not etcd: the catalog's Workflows, rebuilt from their sources."""
CORE_RESOURCES: tuple[ResourceDefinition, ...] = (events.DEFINITION,)
ALL_RESOURCES = PLNT_RESOURCES + CORE_RESOURCES
STANDALONE_CORE_RESOURCES: tuple[ResourceDefinition, ...] = (
    events.DEFINITION,
    namespaces.DEFINITION,
    namespaces.SERVICES,
)
STANDALONE_RESOURCES = PLNT_RESOURCES + STANDALONE_CORE_RESOURCES


def core_resources(*, standalone: bool) -> tuple[ResourceDefinition, ...]:
    """The core/v1 resources a server serves (more when no cluster provides them)."""
    return STANDALONE_CORE_RESOURCES if standalone else CORE_RESOURCES


def all_resources(*, standalone: bool) -> tuple[ResourceDefinition, ...]:
    return STANDALONE_RESOURCES if standalone else ALL_RESOURCES
