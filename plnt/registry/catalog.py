"""Every resource plnt serves, in discovery order."""

from __future__ import annotations

from plnt.registry import events, plntbackends, workflowruns
from plnt.registry.definitions import ResourceDefinition

PLNT_RESOURCES: tuple[ResourceDefinition, ...] = (
    workflowruns.DEFINITION,
    plntbackends.DEFINITION,
)
CORE_RESOURCES: tuple[ResourceDefinition, ...] = (events.DEFINITION,)
ALL_RESOURCES = PLNT_RESOURCES + CORE_RESOURCES
