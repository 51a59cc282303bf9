"""The Deployment controller of the kubelet simulator, without ReplicaSets.

Pods are owned by the Deployment itself and named `<deployment>-<pod-template-hash>-<suffix>`
(kube puts a ReplicaSet of that name in between). A changed template rolls out as the
strategy allows: new pods while the total stays within replicas + maxSurge, old pods
removed while the ready ones stay at least replicas - maxUnavailable (Recreate: old pods
first). Status carries observedGeneration, replicas, updatedReplicas, readyReplicas,
availableReplicas (minReadySeconds is not waited), unavailableReplicas and kube's
Available / Progressing conditions, with ProgressDeadlineExceeded once no count changed
for progressDeadlineSeconds. Every write goes through the stand-in's registry.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from tests.support.kube import kinds, resources, statuses, store, subresources, workloads

Obj = dict[str, Any]
MANAGER = "kube-controller-manager"


class DeploymentController:
    """Creates and deletes a Deployment's pods and reports its status."""

    def __init__(self, api: resources.Resources, status: subresources.Subresources) -> None:
        self.api, self.status, self.store = api, status, api.store
        self.progress: dict[str, tuple[tuple[int, ...], float]] = {}

    def owned_pods(self, deployment: Obj) -> list[Obj]:
        uid = deployment["metadata"]["uid"]
        return [
            p
            for p in self.store.list("pods", deployment["metadata"]["namespace"])
            if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]

    def sync(self, deployment: Obj) -> None:
        spec = deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        template_hash = workloads.template_hash(spec["template"])
        pods = self.owned_pods(deployment)
        new = [p for p in pods if labels(p).get("pod-template-hash") == template_hash]
        old = [p for p in pods if p not in new]
        surge, unavailable = _rolling(spec, replicas)
        if spec.get("strategy", {}).get("type") == "Recreate":
            surge, unavailable = 0, replicas
        ready = sum(1 for p in pods if pod_ready(p))
        for pod in sorted(old, key=_ready_last):
            if not pod_ready(pod) or ready - 1 >= replicas - unavailable:
                ready -= 1 if pod_ready(pod) else 0
                self._delete_pod(pod)
                old.remove(pod)
        if spec.get("strategy", {}).get("type") == "Recreate" and old:
            return
        while len(new) < replicas and len(new) + len(old) < replicas + surge:
            new.append(self._create_pod(deployment, template_hash))
        for pod in sorted(new, key=_ready_last)[: max(len(new) - replicas, 0)]:
            self._delete_pod(pod)

    def _create_pod(self, deployment: Obj, template_hash: str) -> Obj:
        meta, template = deployment["metadata"], deployment["spec"]["template"]
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            "pod-template-hash": template_hash,
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-{template_hash}-",
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": dict(template.get("spec") or {}),
        }
        if not pod["metadata"]["annotations"]:
            del pod["metadata"]["annotations"]
        return self.api.create(kinds.PODS, meta["namespace"], pod, manager=MANAGER)

    def _delete_pod(self, pod: Obj) -> None:
        with contextlib.suppress(statuses.StatusError):
            self.api.delete(kinds.PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def report(self, deployment: Obj) -> None:
        meta, spec = deployment["metadata"], deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        template_hash = workloads.template_hash(spec["template"])
        pods = self.owned_pods(deployment)
        updated = sum(1 for p in pods if labels(p).get("pod-template-hash") == template_hash)
        ready = sum(1 for p in pods if pod_ready(p))
        _, unavailable = _rolling(spec, replicas)
        rs_name = f"{meta['name']}-{template_hash}"
        counts = (meta.get("generation", 1), len(pods), updated, ready)
        previous = self.progress.get(meta["uid"])
        now = time.monotonic()
        if previous is None or previous[0] != counts:
            self.progress[meta["uid"]] = (counts, now)
            previous = (counts, now)
        complete = updated == replicas and ready == replicas and len(pods) == replicas
        deadline = float(spec.get("progressDeadlineSeconds", 600))
        if complete:
            progressing = (
                "True",
                "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.',
            )
        elif now - previous[1] > deadline:
            progressing = (
                "False",
                "ProgressDeadlineExceeded",
                f'ReplicaSet "{rs_name}" has timed out progressing.',
            )
        else:
            progressing = ("True", "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
        available = (
            ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
            if ready >= replicas - unavailable
            else (
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        )
        status: Obj = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(replicas - ready, 0),
        }
        status = {k: v for k, v in status.items() if v or k == "observedGeneration"}
        old = deployment.get("status") or {}
        status["conditions"] = conditions(
            old.get("conditions") or [],
            [("Available", *available), ("Progressing", *progressing)],
            update_time=True,
        )
        self.write_status(kinds.DEPLOYMENTS, deployment, status, MANAGER)

    def write_status(self, view: kinds.View, obj: Obj, status: Obj, manager: str) -> None:
        if obj.get("status") == status:
            return
        updated = {**view.wire(obj), "status": status}
        with contextlib.suppress(statuses.StatusError):  # a newer write won; next pass redoes it
            self.status.update_status(
                view,
                obj["metadata"].get("namespace", ""),
                obj["metadata"]["name"],
                updated,
                manager=manager,
            )


def labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def owner(pod: Obj) -> str:
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "Deployment":
            return str(owner["name"])
    return ""


def pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _ready_last(pod: Obj) -> tuple[bool, str]:
    return pod_ready(pod), pod["metadata"].get("creationTimestamp", "")


def _scaled(value: Any, replicas: int, *, up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = replicas * int(value[:-1]) / 100
        return int(-(-exact // 1)) if up else int(exact // 1)
    return int(value)


def _rolling(spec: Obj, replicas: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as kube resolves them (surge up, unavailable down)."""
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _scaled(rolling.get("maxSurge", "25%"), replicas, up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def conditions(
    old: list[Obj], wanted: list[tuple[str, str, str, str]], *, update_time: bool = False
) -> list[Obj]:
    """Conditions with lastTransitionTime kept while status, reason and message stay."""
    by_type = {c["type"]: c for c in old}
    now = store.now_rfc3339()
    out = []
    for kind, status, reason, message in wanted:
        before = by_type.get(kind)
        same = before is not None and (
            before.get("status"),
            before.get("reason", ""),
            before.get("message", ""),
        ) == (status, reason, message)
        condition: Obj = {"type": kind, "status": status}
        if update_time:
            condition["lastUpdateTime"] = (
                before.get("lastUpdateTime", now) if same and before else now
            )
        condition["lastTransitionTime"] = (
            before.get("lastTransitionTime", now)
            if before and before.get("status") == status
            else now
        )
        if not update_time:
            condition["lastProbeTime"] = None
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        out.append(condition)
    return out
