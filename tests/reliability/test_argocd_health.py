"""The Argo CD health check documented in docs/gitops.md agrees with kstatus in every phase.

The Lua script is taken from the documentation itself (its one `lua` block), so the
document cannot drift from what is tested, and runs in Lua 5.1 through `lupa` (Argo CD
runs health scripts in gopher-lua, a Lua 5.1), with `obj` set as Argo CD sets it. Each
phase is a status the registry or the saga writes (see `test_kstatus.py`); Argo CD's
Progressing, Healthy and Degraded must be kstatus's InProgress, Current and Failed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from lupa import lua51

from plnt.api.workflowruns import WorkflowRun
from plnt.registry.workflowruns.strategy import WorkflowRunStrategy
from tests.support.kstatus import body, compute, ready_at

DOC = Path(__file__).resolve().parents[2] / "docs" / "gitops.md"
ARGO_OF_KSTATUS = {"InProgress": "Progressing", "Current": "Healthy", "Failed": "Degraded"}


def script() -> str:
    (found,) = re.findall(r"```lua\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    return str(found)


def to_lua(runtime: Any, value: Any) -> Any:
    """JSON as gopher-lua sees it: objects and arrays as tables (arrays from index 1)."""
    if isinstance(value, dict):
        return runtime.table_from({k: to_lua(runtime, v) for k, v in value.items()})
    if isinstance(value, list):
        return runtime.table_from([to_lua(runtime, v) for v in value])
    return value


def health(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of Argo CD's health check for `obj`."""
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    runtime.globals().obj = to_lua(runtime, obj)
    hs = runtime.execute(script())
    return str(hs["status"]), str(hs["message"])


def condition(kind: str, status: str, reason: str, generation: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"{kind} {reason}",
        "observedGeneration": generation,
    }


def created() -> dict[str, Any]:
    obj = body()
    WorkflowRunStrategy(model=WorkflowRun, teardown_finalizer=True).prepare_for_create(obj)
    return obj


def changed() -> dict[str, Any]:
    new = body("b")
    WorkflowRunStrategy(model=WorkflowRun, teardown_finalizer=True).prepare_for_update(
        new, ready_at(body("a"), 1)
    )
    return new


def phase(generation: int, observed: int, *conditions: dict[str, Any]) -> dict[str, Any]:
    obj = body()
    obj["metadata"]["generation"] = generation
    obj["status"] = {"observedGeneration": observed, "conditions": list(conditions)}
    return obj


PHASES: dict[str, dict[str, Any]] = {
    "no status": body(),
    "created": created(),
    "spec changed": changed(),
    "deploying": phase(
        1,
        1,
        condition("Ready", "False", "Deploying", 1),
        condition("Progressing", "True", "Deploying", 1),
        condition("Reconciling", "True", "Deploying", 1),
    ),
    "superseded report": phase(
        2,
        1,
        condition("Progressing", "False", "Superseded", 1),
        condition("Reconciling", "True", "Superseded", 1),
    ),
    "promoted": phase(
        2,
        2,
        condition("Ready", "True", "Promoted", 2),
        condition("Progressing", "False", "DeployComplete", 2),
        condition("Degraded", "False", "Healthy", 2),
    ),
    "failed, retry due": phase(
        1,
        1,
        condition("Ready", "False", "InstallFailed", 1),
        condition("Progressing", "False", "InstallFailed", 1),
        condition("Reconciling", "True", "InstallFailed", 1),
    ),
    "degraded, stable serves": phase(
        2,
        2,
        condition("Ready", "True", "RolledBack", 2),
        condition("Progressing", "False", "SmokeFailed", 2),
        condition("Degraded", "True", "SmokeFailed", 2),
        condition("Stalled", "True", "SmokeFailed", 2),
    ),
    "ready false without stall": phase(1, 1, condition("Ready", "False", "Pending", 1)),
}


@pytest.mark.parametrize("name", list(PHASES))
def test_the_argocd_health_of_each_phase_is_the_kstatus_reading(name: str) -> None:
    obj = PHASES[name]
    status, message = health(obj)
    assert status == ARGO_OF_KSTATUS[compute(obj).status], (name, status, message)
    assert message


def test_a_stalled_run_is_degraded_with_the_reason_and_message() -> None:
    status, message = health(PHASES["degraded, stable serves"])
    assert (status, message) == ("Degraded", "SmokeFailed: Stalled SmokeFailed")
