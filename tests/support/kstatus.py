"""An oracle of kstatus, and the WorkflowRun bodies the kstatus and GitOps tests read with it.

kstatus (`sigs.k8s.io/cli-utils/pkg/kstatus/status`, and the fluxcd fork Helm 4 and
Flux build on) is how Helm's `--wait`, Flux and kpt decide that an object is done.
`compute` is an oracle written for plnt's tests from its generic rules (`generic.go`
`checkGenericProperties`/`checkGeneration`, then `status.go` `checkReadyCondition` and
the fallback), in their order:

1. `metadata.deletionTimestamp` set: Terminating;
2. `status.observedGeneration` present and not `metadata.generation`: InProgress
   (reason LatestGenerationNotObserved);
3. the first condition, in list order, that is `Reconciling=True` (InProgress) or
   `Stalled=True` (Failed);
4. (the built-in kinds' own rules: none applies to plnt.work);
5. a `Ready` condition: True is Current, False or Unknown InProgress;
6. otherwise Current.

`body()` is a WorkflowRun as written, `ready_at(obj, generation)` the same object as the
saga leaves it once that generation serves.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Result:
    """kstatus's `Result`: the status, its message, and the reason it was read from."""

    status: str
    message: str = ""
    reason: str = ""


def compute(obj: dict[str, Any]) -> Result:
    """kstatus's status of `obj` by its generic rules (see the module docstring)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return Result("Terminating", "Resource scheduled for deletion")
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        message = (
            f"{obj.get('kind')} generation is {generation}, "
            f"but latest observed generation is {observed}"
        )
        return Result("InProgress", message, "LatestGenerationNotObserved")
    conditions = status.get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "Reconciling" and condition.get("status") == "True":
            return Result("InProgress", condition.get("message", ""), condition.get("reason", ""))
        if condition.get("type") == "Stalled" and condition.get("status") == "True":
            return Result("Failed", condition.get("message", ""), condition.get("reason", ""))
    for condition in conditions:
        if condition.get("type") != "Ready":
            continue
        if condition.get("status") == "True":
            return Result("Current", "Resource is Ready")
        if condition.get("status") in ("False", "Unknown"):
            return Result("InProgress", condition.get("message", ""), condition.get("reason", ""))
    return Result("Current", "Resource is current")


def body(digest_char: str = "a", *, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "run", "namespace": "default"},
        "spec": {
            "workflow": {"ref": "oci-layout:examples:a", "digest": "sha256:" + digest_char * 64},
            "replicas": replicas,
        },
    }


def ready_at(obj: dict[str, Any], generation: int) -> dict[str, Any]:
    """`obj` as the saga leaves it once `generation` serves."""
    done = copy.deepcopy(obj)
    done["metadata"]["generation"] = generation
    done["status"] = {
        "phase": "Ready",
        "observedGeneration": generation,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Promoted", "message": "serves"},
            {"type": "Progressing", "status": "False", "reason": "DeployComplete"},
        ],
    }
    return done
