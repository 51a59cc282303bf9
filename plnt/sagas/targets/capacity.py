"""Whether a cluster can hold a revision's pods, before anything is installed.

Pure functions over Nodes and Pods as the API serves them: a node's free room is its
allocatable minus what the pods scheduled on it (not finished) request; a node is a
candidate when it matches the pod's nodeSelector and tolerates its taints; candidates
are grouped into pools by a node label. The answer is how many pods fit in each pool,
so the Kubernetes target can refuse a canary no pool can hold with a message naming
what is needed and the best pool's free room, instead of leaving Pending pods behind.
A simplification of kube-scheduler's filters (resources, nodeSelector, taints), not a
replacement: affinity terms and topology spread are not evaluated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Object = Mapping[str, Any]
POOL_LABEL = "plnt.work/pool"

_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}  # fmt: skip
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity(text: str | int | float) -> Decimal:
    """A resource.Quantity (`500m`, `2Gi`, `1`) as a number of base units."""
    match = _QUANTITY.match(str(text).strip())
    if match is None or match.group(2) not in _SUFFIXES:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]


def requests_of(resources: Object) -> dict[str, Decimal]:
    """A container's requests; an extended resource (a GPU) requested by its limit only
    counts its limit, as kube defaults requests from limits."""
    requests = {name: quantity(v) for name, v in (resources.get("requests") or {}).items()}
    for name, value in (resources.get("limits") or {}).items():
        if name not in requests and name not in ("cpu", "memory"):
            requests[name] = quantity(value)
    return requests


def _pod_requests(pod: Object) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in requests_of(container.get("resources") or {}).items():
            total[name] = total.get(name, Decimal(0)) + value
    return total


def _tolerates(taint: Object, tolerations: Iterable[Object]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


@dataclass(frozen=True)
class Pod:
    """What one pod of the revision needs and where it may go."""

    requests: Mapping[str, Decimal]
    node_selector: Mapping[str, str]
    tolerations: tuple[Object, ...] = ()


@dataclass(frozen=True)
class Pool:
    """How many of the pods fit in one pool, and its free room."""

    name: str
    fits: int
    free: Mapping[str, Decimal]


def pools(nodes: Iterable[Object], pods: Iterable[Object], pod: Pod, *, label: str) -> list[Pool]:
    """Every pool with a candidate node, most room for `pod` first."""
    used: dict[str, dict[str, Decimal]] = {}
    for scheduled in pods:
        node = (scheduled.get("spec") or {}).get("nodeName")
        phase = (scheduled.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        for name, value in _pod_requests(scheduled).items():
            used.setdefault(node, {})[name] = used.get(node, {}).get(name, Decimal(0)) + value
    grouped: dict[str, tuple[int, dict[str, Decimal]]] = {}
    for node in nodes:
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        labels = meta.get("labels") or {}
        if spec.get("unschedulable") or any(
            labels.get(k) != v for k, v in pod.node_selector.items()
        ):
            continue
        if not all(_tolerates(t, pod.tolerations) for t in spec.get("taints") or []):
            continue
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        free = {
            name: quantity(value) - used.get(meta.get("name", ""), {}).get(name, Decimal(0))
            for name, value in allocatable.items()
        }
        fits = min(
            (
                math.floor(free.get(name, Decimal(0)) / need) if need > 0 else 10**9
                for name, need in pod.requests.items()
            ),
            default=10**9,
        )
        pool = str(labels.get(label) or meta.get("name", ""))
        count, room = grouped.get(pool, (0, {}))
        merged = {k: room.get(k, Decimal(0)) + free.get(k, Decimal(0)) for k in {*room, *free}}
        grouped[pool] = (count + max(fits, 0), merged)
    found = [Pool(name, count, room) for name, (count, room) in grouped.items()]
    return sorted(found, key=lambda p: (-p.fits, p.name))


def describe(amounts: Mapping[str, Decimal]) -> str:
    """`nvidia.com/gpu: 1, cpu: 500m` — quantities as a human writes them."""

    def one(name: str, value: Decimal) -> str:
        if name == "cpu" and value != value.to_integral_value():
            return f"{name}: {int(value * 1000)}m"
        if name.endswith("memory") and value >= 2**20:
            return f"{name}: {int(value / 2**20)}Mi"
        return f"{name}: {value.normalize():f}"

    return ", ".join(one(name, value) for name, value in sorted(amounts.items()))
