"""Reading a WorkflowRun's status: its conditions, its saga timeline, whether the saga settled.

Plain functions over the object as the API returns it, so every test that waits on a
deploy asks the same question the same way.
"""

from __future__ import annotations

from typing import Any

from tests.support.plnt_server import Kubectl, wait_for


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind`, if the object has it."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return None


def step_of(obj: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The saga timeline step `name` of the object's status, if present."""
    for item in (obj.get("status") or {}).get("saga") or []:
        if item.get("name") == name:
            return dict(item)
    return None


def settled(obj: dict[str, Any]) -> bool:
    """The saga has finished with the object's current generation (deployed, failed or not)."""
    generation = obj["metadata"].get("generation")
    status = obj.get("status") or {}
    progressing = condition_of(obj, "Progressing")
    return (
        status.get("observedGeneration") == generation
        and progressing is not None
        and progressing["status"] == "False"
        and progressing.get("observedGeneration") == generation
        and status.get("phase") not in (None, "RollingBack")
    )


def wait_for_phase(kubectl: Kubectl, namespace: str, name: str, phase: str) -> dict[str, Any]:
    """The run once its status.phase is `phase` (within a minute)."""

    def reached() -> dict[str, Any] | None:
        obj: dict[str, Any] = kubectl.json("get", "-n", namespace, f"wfr/{name}")
        return obj if (obj.get("status") or {}).get("phase") == phase else None

    found: dict[str, Any] = wait_for(reached, timeout=60, message=f"{name} in phase {phase}")
    return found
