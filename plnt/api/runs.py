"""A WorkflowRun by name (`RunKey`) and by identity (`RunRef`): plain frozen dataclasses.

Both the API server and the deploy saga speak of runs: the server keys its per-run state
(traffic and shadow logs, bench gauges, pending deploy submissions) by namespace and name;
the saga and its targets need the object's uid too, since a recreated object with the
same name is a new run. Both are defined here, beside each other, so the server and the
saga share one notion of "a run" instead of a bare `tuple[str, str]` on one side.

`RunRef` is part of the deploy saga's Temporal history (`plnt.sagas.values` re-exports
it, under the name histories were recorded with). Temporal's data converter writes a
dataclass as a JSON object of its fields and reads it back by the type hints of the
workflow and activity signatures, never by the class's module: moving the class changes
no payload. So the same rule as `plnt.sagas.values` holds: add fields only with
defaults, never rename one. No pydantic and no I/O: the workflow code imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class RunKey:
    """One WorkflowRun by namespace and name: what the API server keys per-run state by.

    Ordered (namespace, then name), so state keyed by it lists in a stable order.
    """

    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> RunKey:
        """The key of a WorkflowRun object (its `metadata.namespace` and `.name`)."""
        metadata = obj.get("metadata") or {}
        return cls(str(metadata.get("namespace", "")), str(metadata.get("name", "")))


@dataclass(frozen=True)
class RunRef:
    """One WorkflowRun by identity: a recreated object with the same name is a new run.

    The one run reference of the deploy saga: its history carries it, and the targets
    (`plnt.sagas.targets.interface`) key a run's replicas by it.
    """

    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> RunKey:
        """The run by name, as the API server keys it (the uid left out)."""
        return RunKey(self.namespace, self.name)
