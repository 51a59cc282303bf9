"""A kubelet simulator with the controllers around it, running real processes for pods.

What it stands in for: kube-controller-manager's Deployment controller (without
ReplicaSets: pods are owned by the Deployment and named `<deployment>-<hash>-<suffix>`
with a `pod-template-hash` label), the garbage collector (pods of a deleted Deployment,
slices of a deleted Service), kube-scheduler (`scheduling`), kubelets on simulated Nodes
(`containers` runs each container as a local process) and the EndpointSlice controller.
It runs on the stand-in's event loop, wakes on every stored change and otherwise polls
every `interval`; it writes through the stand-in's own registry (`resources`,
`subresources`), so everything it writes is validated like a client's write.

Pods: Pending with `PodScheduled=False` / `Unschedulable` and kube's FitError message when
no node fits; otherwise bound to a node, their volumes materialised, and each container
started: `ErrImagePull` then `ImagePullBackOff` for an image marked failing
(`fail_pull`), `CreateContainerError` when no command is known, `ContainerCreating` while
a mounted ConfigMap/Secret is missing. Readiness is the container's readinessProbe
(httpGet against the real process, tcpSocket, or exec is treated as success), probed
every `probe_interval` rather than `periodSeconds`; without a probe a running container
is ready. An exited container waits in `CrashLoopBackOff` (`lastState.terminated` holds
the exit code and the log tail) and is restarted after a back-off that starts at
`backoff` seconds and doubles (kube: 10 s to 5 min). `crash(namespace, deployment)` kills
its containers and holds them in CrashLoopBackOff until `recover`.

Deployments: replicas created and removed as the rolling update strategy allows
(maxSurge/maxUnavailable; Recreate removes old pods first); status with observedGeneration,
replicas, updatedReplicas, readyReplicas, availableReplicas (minReadySeconds is not
waited), unavailableReplicas and the Available/Progressing conditions worded as kube's,
including ProgressDeadlineExceeded after progressDeadlineSeconds.

EndpointSlices: a real cluster gives every pod its own IP and one port number per
service port, so one slice holds many endpoints. Here every pod is 127.0.0.1 with a port
of its own; the EndpointSlice controller puts endpoints whose ports resolve differently
into different slices, so each ready-or-not pod with a known port gets its own slice
(`<service>-<hash>`), whose `ports` carry that pod's real port. Consumers must read the
port from the slice, never from the Service.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.kube import (
    containers,
    kinds,
    scheduling,
    server,
    statuses,
    store,
    subresources,
    workloads,
)

Obj = dict[str, Any]
MANAGER = "kube-controller-manager"
KUBELET = "kubelet"


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    gpus: int = 0,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
) -> Obj:
    """A Node as a kubelet registers it: labels, allocatable (= capacity), taints, Ready."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    now = store.now_rfc3339()
    info_keys = (
        "architecture",
        "bootID",
        "containerRuntimeVersion",
        "kernelVersion",
        "kubeProxyVersion",
        "kubeletVersion",
        "machineID",
        "operatingSystem",
        "osImage",
        "systemUUID",
    )
    info = dict.fromkeys(info_keys, "standin") | {"operatingSystem": "linux"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": info,
        },
    }


@dataclass
class Container:
    """What the kubelet knows of one container of a running pod."""

    name: str
    spec: Obj
    current: containers.Process | None = None
    restarts: int = 0
    waiting: tuple[str, str] | None = ("ContainerCreating", "")
    last_terminated: Obj | None = None
    started_at: str = ""
    ready: bool = False
    probed_at: float = 0.0
    failures: int = 0
    next_start: float = 0.0
    delay: float = 0.0
    pulls: int = 0


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    root: Path
    started: str
    containers: dict[str, Container] = field(default_factory=dict)
    mounts: dict[str, Path] | None = None


class Kubelet:
    """The simulator: nodes, controllers and processes, owned by one stand-in."""

    def __init__(
        self,
        state: server.State,
        directory: Path,
        *,
        interval: float = 0.1,
        probe_interval: float = 0.2,
        backoff: float = 0.5,
        grace: float = 5.0,
    ) -> None:
        self.api = state.resources
        self.status = subresources.Subresources(state.resources)
        self.store = state.store
        self.directory = directory
        self.interval, self.probe_interval = interval, probe_interval
        self.backoff, self.grace = backoff, grace
        self.images = containers.Images()
        self.crashing: set[tuple[str, str]] = set()
        self.pods: dict[str, PodRuntime] = {}
        self.progress: dict[str, tuple[tuple[int, ...], float]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.errors: list[BaseException] = []

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, nodes: list[Obj]) -> None:
        for obj in nodes:
            self.api.create(kinds.NODES, "", obj, manager=KUBELET)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        self.store.on_change.append(self._changed)
        self._task = asyncio.create_task(self._run(), name="kubelet-simulator")

    def _changed(self, change: store.Change) -> None:
        self._wake.set()

    async def close(self) -> None:
        """Stop the loop and every process (also when a test failed)."""
        if self._changed in self.store.on_change:
            self.store.on_change.remove(self._changed)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.gather(*(self._stop_pod(uid) for uid in list(self.pods)))
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.reconcile()
            except Exception as error:  # kept for the test to see; the loop goes on
                self.errors.append(error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    # --- failure injection --------------------------------------------------------------

    async def fail_pull(self, image: str) -> None:
        """Every pull of `image` fails from now on (ErrImagePull, then ImagePullBackOff)."""
        self.images.failing.add(image)
        self._wake.set()

    async def crash(self, namespace: str, deployment: str) -> None:
        """Kill the deployment's containers and keep them down (CrashLoopBackOff)."""
        self.crashing.add((namespace, deployment))
        for runtime in self.pods.values():
            pod = self.store.get("pods", runtime.namespace, runtime.name)
            if pod is not None and runtime.namespace == namespace and _owner(pod) == deployment:
                for container in runtime.containers.values():
                    if container.current is not None:
                        await container.current.stop(0)
        self._wake.set()

    async def recover(self, namespace: str, deployment: str) -> None:
        self.crashing.discard((namespace, deployment))
        self._wake.set()

    # --- the loop --------------------------------------------------------------------------

    async def reconcile(self) -> None:
        for deployment in self.store.list("deployments"):
            self._sync_deployment(deployment)
        self._collect_garbage()
        for pod in self.store.list("pods"):
            await self._sync_pod(pod)
        for uid in [u for u in self.pods if not self._pod_exists(u)]:
            await self._stop_pod(uid)
        for deployment in self.store.list("deployments"):
            self._deployment_status(deployment)
        self._endpoint_slices()

    def _pod_exists(self, uid: str) -> bool:
        runtime = self.pods[uid]
        pod = self.store.get("pods", runtime.namespace, runtime.name)
        return pod is not None and pod["metadata"]["uid"] == uid

    def _collect_garbage(self) -> None:
        uids = {
            (d["metadata"]["namespace"], d["metadata"]["uid"])
            for d in self.store.list("deployments")
        }
        uids |= {
            (s["metadata"]["namespace"], s["metadata"]["uid"]) for s in self.store.list("services")
        }
        for resource, view in (("pods", kinds.PODS), ("endpointslices", kinds.ENDPOINT_SLICES)):
            for obj in self.store.list(resource):
                owners = obj["metadata"].get("ownerReferences") or []
                namespace = obj["metadata"]["namespace"]
                if owners and not any((namespace, o["uid"]) in uids for o in owners):
                    with contextlib.suppress(statuses.StatusError):
                        self.api.delete(view, namespace, obj["metadata"]["name"])

    # --- deployments -----------------------------------------------------------------------

    def _owned_pods(self, deployment: Obj) -> list[Obj]:
        uid = deployment["metadata"]["uid"]
        return [
            p
            for p in self.store.list("pods", deployment["metadata"]["namespace"])
            if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
        ]

    def _sync_deployment(self, deployment: Obj) -> None:
        spec = deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        template_hash = workloads.template_hash(spec["template"])
        pods = self._owned_pods(deployment)
        new = [p for p in pods if _labels(p).get("pod-template-hash") == template_hash]
        old = [p for p in pods if p not in new]
        surge, unavailable = _rolling(spec, replicas)
        if spec.get("strategy", {}).get("type") == "Recreate":
            surge, unavailable = 0, replicas
        ready = sum(1 for p in pods if _pod_ready(p))
        for pod in sorted(old, key=_ready_last):
            if not _pod_ready(pod) or ready - 1 >= replicas - unavailable:
                ready -= 1 if _pod_ready(pod) else 0
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

    def _deployment_status(self, deployment: Obj) -> None:
        meta, spec = deployment["metadata"], deployment["spec"]
        replicas = int(spec.get("replicas", 1))
        template_hash = workloads.template_hash(spec["template"])
        pods = self._owned_pods(deployment)
        updated = sum(1 for p in pods if _labels(p).get("pod-template-hash") == template_hash)
        ready = sum(1 for p in pods if _pod_ready(p))
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
        status["conditions"] = _conditions(
            old.get("conditions") or [],
            [("Available", *available), ("Progressing", *progressing)],
            update_time=True,
        )
        self._write_status(kinds.DEPLOYMENTS, deployment, status, MANAGER)

    def _write_status(self, view: kinds.View, obj: Obj, status: Obj, manager: str) -> None:
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

    # --- pods ------------------------------------------------------------------------------

    def _placed(self) -> dict[str, list[dict[str, float]]]:
        placed: dict[str, list[dict[str, float]]] = {}
        for pod in self.store.list("pods"):
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                placed.setdefault(node_name, []).append(scheduling.pod_requests(pod["spec"]))
        return placed

    async def _sync_pod(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        if not spec.get("nodeName"):
            placement = scheduling.place(spec, self.store.list("nodes"), self._placed())
            if not placement.node:
                status = dict(pod.get("status") or {"phase": "Pending"})
                status["conditions"] = _conditions(
                    status.get("conditions") or [],
                    [("PodScheduled", "False", "Unschedulable", placement.message)],
                )
                self._write_status(kinds.PODS, pod, status, "default-scheduler")
                return
            pod["spec"]["nodeName"] = placement.node  # the binding subresource's effect
            pod["metadata"].pop("resourceVersion", None)
            pod = self.store.update("pods", pod)
        runtime = self.pods.get(meta["uid"])
        if runtime is None:
            root = self.directory / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}"
            runtime = PodRuntime(
                meta["uid"], meta["namespace"], meta["name"], root, store.now_rfc3339()
            )
            runtime.containers = {c["name"]: Container(c["name"], c) for c in spec["containers"]}
            self.pods[meta["uid"]] = runtime
        for container in runtime.containers.values():
            await self._sync_container(pod, runtime, container)
        await self._probe(runtime)
        self._write_status(kinds.PODS, pod, self._pod_status(pod, runtime), KUBELET)

    def _lookup(self, namespace: str) -> Any:
        return lambda resource, name: self.store.get(resource, namespace, name)

    async def _sync_container(self, pod: Obj, runtime: PodRuntime, container: Container) -> None:
        now = time.monotonic()
        current = container.current
        if current is not None and current.exited:
            code = current.process.returncode or 0
            container.last_terminated = {
                "exitCode": code if code >= 0 else 128 - code,
                "reason": "Completed" if code == 0 else "Error",
                "message": current.tail(),
                "startedAt": container.started_at,
                "finishedAt": store.now_rfc3339(),
                "containerID": f"standin://{current.process.pid}",
            }
            container.current, container.ready = None, False
            container.delay = min(
                container.delay * 2 if container.delay else self.backoff, 30 * self.backoff
            )
            container.next_start = now + container.delay
            container.waiting = (
                "CrashLoopBackOff",
                f"back-off {container.delay:g}s restarting "
                f"failed container={container.name} pod={runtime.name}_"
                f"{runtime.namespace}({runtime.uid})",
            )
        if container.current is not None or now < container.next_start:
            return
        if (runtime.namespace, _owner(pod)) in self.crashing and container.last_terminated:
            return
        image = str(container.spec.get("image", ""))
        if image in self.images.failing:
            container.pulls += 1
            reason = "ErrImagePull" if container.pulls == 1 else "ImagePullBackOff"
            text = f'failed to pull and unpack image "{image}": stand-in: pull failure injected'
            if reason == "ImagePullBackOff":
                text = f'Back-off pulling image "{image}": ErrImagePull: {text}'
            container.waiting, container.next_start = (reason, text), now + self.backoff
            return
        try:
            if runtime.mounts is None:
                runtime.mounts = containers.materialise(
                    pod, runtime.root, self._lookup(runtime.namespace)
                )
            argv, port = containers.command_line(container.spec, self.images)
        except containers.MountError as error:
            container.waiting, container.next_start = (
                ("ContainerCreating", str(error)),
                now + self.backoff,
            )
            return
        except containers.ContainerError as error:
            container.waiting, container.next_start = (
                ("CreateContainerError", str(error)),
                now + self.backoff,
            )
            return
        argv = [containers.rewrite_paths(a, runtime.mounts) for a in argv]
        env = containers.environment(
            container.spec, pod, self._lookup(runtime.namespace), runtime.mounts
        )
        log = runtime.root / "logs" / f"{container.name}-{container.restarts}.log"
        if container.last_terminated is not None:
            container.restarts += 1
            log = runtime.root / "logs" / f"{container.name}-{container.restarts}.log"
        container.current = await containers.start(argv, env, runtime.root / "work", log, port)
        container.started_at, container.waiting, container.probed_at = (
            store.now_rfc3339(),
            None,
            0.0,
        )

    async def _probe(self, runtime: PodRuntime) -> None:
        now = time.monotonic()
        for container in runtime.containers.values():
            process = container.current
            if process is None or process.exited:
                container.ready = False
                continue
            probe = container.spec.get("readinessProbe")
            if not probe:
                container.ready = True
                continue
            if now - container.probed_at < self.probe_interval:
                continue
            container.probed_at = now
            ok = await self._check(container, probe)
            container.failures = 0 if ok else container.failures + 1
            if ok:
                container.ready = True
            elif container.failures >= int(probe.get("failureThreshold", 3)) or not container.ready:
                container.ready = False

    def real_port(self, container: Container, port: Any) -> int | None:
        """The local port behind a containerPort number or name of `container`."""
        process = container.current
        if process is None or process.discover_port() is None:
            return None
        names = {p.get("name") for p in container.spec.get("ports") or []}
        if isinstance(port, str) and port not in names:
            return None
        return process.port  # one listening port per container here

    async def _check(self, container: Container, probe: Obj) -> bool:
        action = probe.get("httpGet") or probe.get("tcpSocket")
        if action is None:
            return True  # exec probes are not run; treated as passing
        port = self.real_port(container, action.get("port"))
        if port is None:
            return False
        if "tcpSocket" in probe:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1)
            except (OSError, TimeoutError):
                return False
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True
        assert self._session is not None
        scheme = str(action.get("scheme", "HTTP")).lower()
        url = f"{scheme}://127.0.0.1:{port}{action.get('path', '/')}"
        try:
            async with self._session.get(url, ssl=False) as response:
                await response.read()
                return 200 <= response.status < 400
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    def _pod_status(self, pod: Obj, runtime: PodRuntime) -> Obj:
        statuses_: list[Obj] = []
        for container in runtime.containers.values():
            entry: Obj = {
                "name": container.name,
                "image": container.spec.get("image", ""),
                "imageID": "",
                "ready": container.ready,
                "restartCount": container.restarts,
                "started": container.current is not None,
            }
            if container.current is not None:
                entry["state"] = {"running": {"startedAt": container.started_at}}
                entry["containerID"] = f"standin://{container.current.process.pid}"
            else:
                reason, message = container.waiting or ("ContainerCreating", "")
                entry["state"] = {
                    "waiting": {"reason": reason, **({"message": message} if message else {})}
                }
            entry["lastState"] = (
                {"terminated": container.last_terminated} if container.last_terminated else {}
            )
            statuses_.append(entry)
        all_ready = all(c.ready for c in runtime.containers.values())
        unready = [c.name for c in runtime.containers.values() if not c.ready]
        started = any(
            c.current is not None or c.last_terminated for c in runtime.containers.values()
        )
        not_ready = ("ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        ready_cond = ("True", "", "") if all_ready else ("False", *not_ready)
        old = pod.get("status") or {}
        return {
            "phase": "Running" if started else "Pending",
            "conditions": _conditions(
                old.get("conditions") or [],
                [
                    ("PodReadyToStartContainers", "True", "", ""),
                    ("Initialized", "True", "", ""),
                    ("Ready", *ready_cond),
                    ("ContainersReady", *ready_cond),
                    ("PodScheduled", "True", "", ""),
                ],
            ),
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": runtime.started,
            "qosClass": old.get("qosClass", "BestEffort"),
            "containerStatuses": statuses_,
        }

    async def _stop_pod(self, uid: str) -> None:
        runtime = self.pods.pop(uid, None)
        if runtime is None:
            return
        await asyncio.gather(
            *(c.current.stop(self.grace) for c in runtime.containers.values() if c.current)
        )

    # --- endpoint slices ---------------------------------------------------------------------

    def _endpoint_slices(self) -> None:
        wanted: dict[tuple[str, str], Obj] = {}
        for service in self.store.list("services"):
            selector = (service.get("spec") or {}).get("selector")
            if not selector:
                continue
            namespace = service["metadata"]["namespace"]
            for pod in self.store.list("pods", namespace):
                runtime = self.pods.get(pod["metadata"]["uid"])
                if runtime is None or not all(
                    _labels(pod).get(k) == v for k, v in selector.items()
                ):
                    continue
                ports = self._slice_ports(service, runtime)
                if ports is None:
                    continue
                suffix = hashlib.sha256(runtime.uid.encode()).hexdigest()[:5]
                name = f"{service['metadata']['name']}-{suffix}"
                wanted[(namespace, name)] = _slice(service, pod, name, ports)
        for existing in self.store.list("endpointslices"):
            key = (existing["metadata"]["namespace"], existing["metadata"]["name"])
            if _managed(existing) and key not in wanted:
                with contextlib.suppress(statuses.StatusError):
                    self.api.delete(kinds.ENDPOINT_SLICES, *key)
        for (namespace, name), obj in wanted.items():
            current = self.store.get("endpointslices", namespace, name)
            with contextlib.suppress(statuses.StatusError):
                if current is None:
                    self.api.create(kinds.ENDPOINT_SLICES, namespace, obj, manager=MANAGER)
                elif (current.get("endpoints"), current.get("ports")) != (
                    obj["endpoints"],
                    obj["ports"],
                ):
                    self.api.update(
                        kinds.ENDPOINT_SLICES,
                        namespace,
                        name,
                        {
                            **kinds.ENDPOINT_SLICES.wire(current),
                            "endpoints": obj["endpoints"],
                            "ports": obj["ports"],
                        },
                        manager=MANAGER,
                    )

    def _slice_ports(self, service: Obj, runtime: PodRuntime) -> list[Obj] | None:
        out = []
        for port in service["spec"].get("ports") or []:
            target = port.get("targetPort", port["port"])
            real = None
            for container in runtime.containers.values():
                declared = {p.get("name") for p in container.spec.get("ports") or []}
                numbers = {p["containerPort"] for p in container.spec.get("ports") or []}
                if (isinstance(target, str) and target in declared) or target in numbers:
                    real = self.real_port(container, target)
            if real is None:
                return None
            out.append(
                {
                    "name": port.get("name", ""),
                    "port": real,
                    "protocol": port.get("protocol", "TCP"),
                }
            )
        return out


def _slice(service: Obj, pod: Obj, name: str, ports: list[Obj]) -> Obj:
    svc = service["metadata"]
    ready = _pod_ready(pod)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "generateName": f"{svc['name']}-",
            "namespace": svc["namespace"],
            "labels": {
                "kubernetes.io/service-name": svc["name"],
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": svc["name"],
                    "uid": svc["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": ["127.0.0.1"],
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "nodeName": pod["spec"].get("nodeName", ""),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": svc["namespace"],
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            }
        ],
        "ports": ports,
    }


def _managed(obj: Obj) -> bool:
    labels = _labels(obj)
    return labels.get("endpointslice.kubernetes.io/managed-by") == "endpointslice-controller.k8s.io"


def _labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _owner(pod: Obj) -> str:
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "Deployment":
            return str(owner["name"])
    return ""


def _pod_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _ready_last(pod: Obj) -> tuple[bool, str]:
    return _pod_ready(pod), pod["metadata"].get("creationTimestamp", "")


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


def _conditions(
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
