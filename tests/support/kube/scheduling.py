"""The kubelet simulator's scheduler: which node a pod fits, and kube's words when none does.

After kube-scheduler's default filter plugins, in their order, stopping at the first
that rejects a node: NodeUnschedulable (`node(s) were unschedulable`), TaintToleration
(`node(s) had untolerated taint {key: value}` for NoSchedule/NoExecute taints),
NodeAffinity on `nodeSelector` and required node affinity (`node(s) didn't match Pod's
node affinity/selector`) and NodeResourcesFit (`Insufficient <resource>` for each
resource whose allocatable minus the requests already placed on the node is short,
`Too many pods`). The FitError message is kube's: `0/3 nodes are available: 3
Insufficient nvidia.com/gpu.` with the reasons counted and sorted, followed by the
default preemption plugin's verdict (no lower-priority pods are ever preempted here).
Among fitting nodes the least requested one wins (fewest pods, then name), a stand-in
for kube's scoring. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
UNRESOLVABLE = (
    "node(s) were unschedulable",
    "node(s) had untolerated taint",
    "node(s) didn't match Pod's node affinity/selector",
)


def quantity(value: Any) -> float:
    """A resource.Quantity (`500m`, `2Gi`, `1`) as a number."""
    match = _QUANTITY.match(str(value).strip())
    if not match or (match.group(2) and match.group(2) not in _SUFFIXES):
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    return float(match.group(1)) * _SUFFIXES.get(match.group(2), 1)


def pod_requests(spec: Obj) -> dict[str, float]:
    """Summed container requests (limits stand in for missing requests, as kube defaults)."""
    total: dict[str, float] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in requests.items():
            total[name] = total.get(name, 0.0) + quantity(value)
    for container in spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        for name, value in (resources.get("requests") or {}).items():
            total[name] = max(total.get(name, 0.0), quantity(value))
    return total


def _tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def _term_matches(term: Obj, labels: Mapping[str, str]) -> bool:
    for expression in term.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if operator == "In" and labels.get(key) not in (values or []):
            return False
        if operator == "NotIn" and present and labels[key] in (values or []):
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _affinity_matches(spec: Obj, labels: Mapping[str, str]) -> bool:
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    return not required or any(_term_matches(term, labels) for term in required)


@dataclass(frozen=True)
class Placement:
    node: str  # empty when no node fits
    message: str = ""


def reasons(spec: Obj, node: Obj, placed: list[dict[str, float]]) -> list[str]:
    """Why `node` cannot take a pod of `spec` (empty when it can)."""
    node_spec = node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    tolerations = spec.get("tolerations") or []
    if node_spec.get("unschedulable") and not _tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        return ["node(s) were unschedulable"]
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    if not _affinity_matches(spec, labels):
        return ["node(s) didn't match Pod's node affinity/selector"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out = []
    if len(placed) + 1 > quantity(allocatable.get("pods", 110)):
        out.append("Too many pods")
    for name, wanted in sorted(pod_requests(spec).items()):
        if wanted <= 0:
            continue
        used = sum(p.get(name, 0.0) for p in placed)
        if used + wanted > quantity(allocatable.get(name, 0)) + 1e-9:
            out.append(f"Insufficient {name}")
    return out


def place(spec: Obj, nodes: list[Obj], placed: Mapping[str, list[dict[str, float]]]) -> Placement:
    if not nodes:
        return Placement("", "no nodes available to schedule pods")
    counts: dict[str, int] = {}
    preemption: dict[str, int] = {}
    fitting = []
    for node in nodes:
        name = node["metadata"]["name"]
        found = reasons(spec, node, list(placed.get(name, [])))
        if not found:
            fitting.append(node)
            continue
        for reason in found:
            counts[reason] = counts.get(reason, 0) + 1
        verdict = (
            "Preemption is not helpful for scheduling"
            if any(found[0].startswith(u) for u in UNRESOLVABLE)
            else "No preemption victims found for incoming pod"
        )
        preemption[verdict] = preemption.get(verdict, 0) + 1
    if fitting:
        best = min(
            fitting,
            key=lambda n: (len(placed.get(n["metadata"]["name"], [])), n["metadata"]["name"]),
        )
        return Placement(best["metadata"]["name"])
    total = len(nodes)
    text = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    after = ", ".join(sorted(f"{n} {verdict}" for verdict, n in preemption.items()))
    return Placement(
        "",
        f"0/{total} nodes are available: {text}. "
        f"preemption: 0/{total} nodes are available: {after}.",
    )
