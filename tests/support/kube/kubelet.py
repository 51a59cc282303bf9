"""A kubelet simulator with the controllers around it, running real processes for pods.

What it stands in for: kube-controller-manager's Deployment and EndpointSlice
controllers (without ReplicaSets), the garbage collector (pods of a deleted Deployment,
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

The Deployment controller is `deployments`, the EndpointSlice controller `endpointslices`
(one slice per pod: each pod has a port of its own here).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.kube import (
    containers,
    deployments,
    endpointslices,
    kinds,
    scheduling,
    server,
    statuses,
    store,
    subresources,
)

Obj = dict[str, Any]
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
        self.deployments = deployments.DeploymentController(self.api, self.status)
        self.slices = endpointslices.EndpointSliceController(self.api, self.pods, self.real_port)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.errors: list[BaseException] = []

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, nodes: list[Obj]) -> None:
        for obj in nodes:
            self.api.create(kinds.NODES, "", obj, manager=KUBELET)
        # No pooled connections: a probed container may be stopped at any moment, and a
        # kept-alive connection to it would outlive it unclosed (plain HTTP: closing is
        # immediate, there is no TLS shutdown to wait for).
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=2),
            connector=aiohttp.TCPConnector(force_close=True),
        )
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
            if (
                pod is not None
                and runtime.namespace == namespace
                and deployments.owner(pod) == deployment
            ):
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
            self.deployments.sync(deployment)
        self._collect_garbage()
        for pod in self.store.list("pods"):
            await self._sync_pod(pod)
        for uid in [u for u in self.pods if not self._pod_exists(u)]:
            await self._stop_pod(uid)
        for deployment in self.store.list("deployments"):
            self.deployments.report(deployment)
        self.slices.sync()

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
                status["conditions"] = deployments.conditions(
                    status.get("conditions") or [],
                    [("PodScheduled", "False", "Unschedulable", placement.message)],
                )
                self.deployments.write_status(kinds.PODS, pod, status, "default-scheduler")
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
        self.deployments.write_status(kinds.PODS, pod, self._pod_status(pod, runtime), KUBELET)

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
        if (
            runtime.namespace,
            deployments.owner(pod),
        ) in self.crashing and container.last_terminated:
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
        # Mount paths in the container's own arguments point into the pod's directory;
        # the interpreter that stands for the image's entrypoint is this machine's (it may
        # itself live under a path the pod mounts over, such as /tmp).
        head = argv[:1] if argv[0] == sys.executable else []
        argv = head + [containers.rewrite_paths(a, runtime.mounts) for a in argv[len(head) :]]
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
            "conditions": deployments.conditions(
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
