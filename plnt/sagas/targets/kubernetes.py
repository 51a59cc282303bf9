"""The Kubernetes target: each revision of a run is a Helm release of `charts/workflow-runner`.

`install` installs (or, retried, upgrades and so adopts) the release `<run>-r<revision>`
in the run's namespace with the revision's values (`runners.Revision.to_values`), then
waits until its Deployment has rolled out (`observedGeneration`, `updatedReplicas`,
`availableReplicas`) within `ready_timeout`, polling its status; replicas are the ready
endpoints of its Service's EndpointSlices. A rollout that cannot succeed fails at once
with the cause read from its Pods (`ImagePullBackOff`, `CrashLoopBackOff` with the
container's last message); one that runs out of time names what its Pods wait for
(`Unschedulable: 0/3 nodes are available: …`). `scale` goes through the Deployment's
`scale` subresource; `retire` uninstalls the release; `teardown` every release of the
run, and its HTTPRoute. With `routes` (the worker's `--routes`), `route` keeps a run's
Gateway API HTTPRoute at the weights the saga sets (`targets.routes`). Every operation
is idempotent, as the `Target` contract requires.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from plnt.kube.errors import ClusterError
from plnt.kube.releases import HelmReleases
from plnt.kube.routes import HTTPRoutes
from plnt.kube.workloads import Object, Workloads
from plnt.sagas import routing
from plnt.sagas.targets import capacity, interface, routes, runners
from plnt.sagas.values import RouteBackend

Heartbeat = Callable[[Any], None] | None

FATAL_WAITING = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
     "CreateContainerConfigError", "CreateContainerError"}
)  # fmt: skip
"""Container states a rollout does not recover from by waiting."""


def _rolled_out(deployment: Object, replicas: int, *, autoscaled: bool = False) -> bool:
    """The Deployment runs `replicas` updated, available pods and nothing else (with an
    HPA: at least `replicas`, whatever count the HPA chose)."""
    meta, spec, status = deployment["metadata"], deployment["spec"], deployment.get("status") or {}
    current = spec.get("replicas", 1) if autoscaled else replicas
    return bool(
        status.get("observedGeneration", 0) >= meta.get("generation", 0)
        and spec.get("replicas", 1) == current >= replicas
        and status.get("updatedReplicas", 0) == current
        and status.get("availableReplicas", 0) == current
        and status.get("replicas", 0) == current
    )


def pod_causes(pods: list[Object]) -> tuple[list[str], bool]:
    """What the Pods wait for, one line each, and whether any of it is fatal."""
    causes: list[str] = []
    fatal = False
    for pod in pods:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
                causes.append(f"{name}: {condition.get('reason')}: {condition.get('message')}")
        for container in status.get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if not reason:
                continue
            last = ((container.get("lastState") or {}).get("terminated") or {}).get("message")
            detail = last or waiting.get("message") or ""
            causes.append(f"{name}: {reason}" + (f": {detail.strip()}" if detail else ""))
            fatal = fatal or reason in FATAL_WAITING
    return causes, fatal


def _pod_of(values: dict[str, Any]) -> capacity.Pod:
    """What one runner pod asks for and where it may run: the chart's base resources,
    node selector and tolerations with the GPU class's merged over them (as the chart's
    Deployment template merges them)."""
    gpu = (values.get("gpuClasses") or {}).get(values.get("gpuClass") or "") or {}
    resources: dict[str, dict[str, Any]] = {}
    for source in (values.get("resources") or {}, gpu.get("resources") or {}):
        for kind in ("requests", "limits"):
            resources.setdefault(kind, {}).update(source.get(kind) or {})
    return capacity.Pod(
        requests=capacity.requests_of(resources),
        node_selector={**(values.get("nodeSelector") or {}), **(gpu.get("nodeSelector") or {})},
        tolerations=(*(values.get("tolerations") or []), *(gpu.get("tolerations") or [])),
    )


class KubernetesTarget:
    """Runner revisions as Helm releases in the run's namespace (see the module docstring)."""

    def __init__(
        self,
        *,
        releases: HelmReleases,
        workloads: Workloads,
        chart: str,
        settings: dict[str, Any] | None = None,
        ready_timeout: float = 300.0,
        poll_interval: float = 0.5,
        pool_label: str = capacity.POOL_LABEL,
        cluster_routes: routes.ClusterRoutes | None = None,
        http_routes: HTTPRoutes | None = None,
    ) -> None:
        self.pool_label = pool_label
        self.routes = cluster_routes if http_routes is not None else None
        self.http_routes = http_routes
        self.releases = releases
        self.workloads = workloads
        self.chart = chart
        self.settings = settings or {}
        self.ready_timeout = ready_timeout
        self.poll_interval = poll_interval

    async def install(
        self, revision: interface.Revision, *, heartbeat: Heartbeat = None
    ) -> list[interface.Replica]:
        name = revision.release_name()
        try:
            values = revision.to_values(self.settings)
        except ValueError as error:
            raise interface.InstallFailed(f"release {name}: {error}") from error
        try:
            if await self.workloads.deployment(revision.run.namespace, name) is None:
                await self._check_capacity(values, revision.replicas)
            await self.releases.apply(
                self.chart, namespace=revision.run.namespace, name=name, values=values
            )
        except ClusterError as error:
            raise interface.InstallFailed(str(error)) from error
        return await self._ready(revision, name, heartbeat)

    @property
    def autoscaled(self) -> bool:
        """Whether the shared runner values turn the chart's HPA on."""
        return bool((self.settings.get("autoscaling") or {}).get("enabled"))

    async def _check_capacity(self, values: dict[str, Any], replicas: int) -> None:
        """Refuse, before anything exists, a revision no pool has room for."""
        pod = _pod_of(values)
        if replicas < 1 or not pod.requests:
            return
        found = capacity.pools(
            await self.workloads.nodes(),
            await self.workloads.scheduled_pods(),
            pod,
            label=self.pool_label,
        )
        if found and found[0].fits >= replicas:
            return
        gpu = values.get("gpuClass") or ""
        what = f"gpu class {gpu!r}" if gpu else "the runner"
        needs = capacity.describe(pod.requests)
        if not found:
            room = "no node matches its node selector and tolerates it"
        else:
            best = found[0]
            free = {k: v for k, v in best.free.items() if k in pod.requests}
            room = f"the best pool {best.name!r} fits {best.fits} (free {capacity.describe(free)})"
        raise interface.InsufficientCapacity(
            f"{what} needs {needs} per replica for {replicas} replica(s); {room}"
        )

    async def scale(
        self, revision: interface.Revision, *, heartbeat: Heartbeat = None
    ) -> list[interface.Replica]:
        name, namespace = revision.release_name(), revision.run.namespace
        try:
            if await self.workloads.deployment(namespace, name) is None or self.autoscaled:
                # With an HPA the release moves its bounds (minReplicas is the run's count).
                return await self.install(revision, heartbeat=heartbeat)
            await self.workloads.scale(namespace, name, revision.replicas)
        except ClusterError as error:
            raise interface.InstallFailed(str(error)) from error
        return await self._ready(revision, name, heartbeat)

    async def _ready(
        self, revision: interface.Revision, name: str, heartbeat: Heartbeat
    ) -> list[interface.Replica]:
        namespace, wanted = revision.run.namespace, revision.replicas
        deadline = time.monotonic() + self.ready_timeout
        while True:
            try:
                deployment = await self.workloads.deployment(namespace, name)
                rolled = deployment is not None and _rolled_out(
                    deployment, wanted, autoscaled=self.autoscaled
                )
                if rolled:
                    return await self._replicas(namespace, name, revision.revision)
                pods = await self.workloads.pods(namespace, f"app.kubernetes.io/instance={name}")
            except ClusterError as error:
                raise interface.InstallFailed(str(error)) from error
            causes, fatal = pod_causes(pods)
            if fatal or time.monotonic() >= deadline:
                why = "; ".join(causes) or "its Deployment did not roll out"
                late = "" if fatal else f" within {self.ready_timeout:g}s"
                raise interface.InstallFailed(
                    f"release {namespace}/{name} is not ready{late}: {why}"
                )
            if heartbeat is not None:
                heartbeat({"release": name, "waiting": causes})
            await asyncio.sleep(self.poll_interval)  # poll interval; the deadline bounds it

    async def _replicas(self, namespace: str, name: str, revision: int) -> list[interface.Replica]:
        urls = await self.workloads.endpoints(namespace, name)
        return [interface.Replica(revision, index, url, True) for index, url in enumerate(urls)]

    async def replicas(self, run: interface.RunRef, revision: int) -> list[interface.Replica]:
        try:
            return await self._replicas(
                run.namespace, runners.release_name(run, revision), revision
            )
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error

    async def revisions(self, run: interface.RunRef) -> list[int]:
        try:
            found = await self.workloads.deployments(run.namespace, f"plnt.work/run-uid={run.uid}")
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error
        return sorted(
            int(d["metadata"]["labels"]["plnt.work/revision"])
            for d in found
            if (d.get("spec") or {}).get("replicas", 1) > 0
        )

    async def retire(self, run: interface.RunRef, revision: int) -> None:
        try:
            await self.releases.uninstall(
                namespace=run.namespace, name=runners.release_name(run, revision)
            )
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error

    async def teardown(self, run: interface.RunRef) -> None:
        try:
            found = await self.workloads.deployments(run.namespace, f"plnt.work/run-uid={run.uid}")
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error
        await self._unroute(run)  # applications stop being sent to what goes next
        for deployment in found:
            await self.retire(run, int(deployment["metadata"]["labels"]["plnt.work/revision"]))

    # -- the run's HTTPRoute ----------------------------------------------------------

    def route_of(self, run: interface.RunRef, spec: dict[str, Any] | None) -> str | None:
        """`NAMESPACE/NAME` of the route `spec` (a run's `spec.route`) gives the run, or None.

        Raises `routes.RouteUnavailable` when the run asks for one this worker cannot make.
        """
        if routes.wanted(spec, self.routes) is None:
            return None
        return f"{run.namespace}/{routes.route_name(run)}"

    @property
    def service_port(self) -> int:
        """The port of every revision's Service (the chart's `service.port`)."""
        return int((self.settings.get("service") or {}).get("port") or 80)

    async def route(
        self, run: interface.RunRef, spec: dict[str, Any] | None, backends: list[RouteBackend]
    ) -> str:
        """Make the run's HTTPRoute send its traffic to `backends`; without backends, or
        when the run has no route (any more), remove it. What was done, for a human."""
        wanted = routes.wanted(spec, self.routes)
        name = routes.route_name(run)
        if wanted is None or not backends:
            removed = await self._unroute(run)
            return f"HTTPRoute {run.namespace}/{name} removed" if removed else "no HTTPRoute"
        assert self.http_routes is not None, "routes.wanted needs the worker's --routes"
        route = routes.http_route(run, wanted, backends, port=self.service_port)
        try:
            await self.http_routes.apply(route)
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error
        return f"HTTPRoute {run.namespace}/{name}: {routing.describe(backends)}"

    async def _unroute(self, run: interface.RunRef) -> bool:
        """Remove the run's route (only the run's: its uid label must match)."""
        if self.http_routes is None:
            return False
        name = routes.route_name(run)
        try:
            found = await self.http_routes.get(run.namespace, name)
            labels = ((found or {}).get("metadata") or {}).get("labels") or {}
            if found is None or labels.get("plnt.work/run-uid") != run.uid:
                return False
            uid = found["metadata"].get("uid")
            return await self.http_routes.delete(run.namespace, name, uid=uid)
        except ClusterError as error:
            raise interface.TargetError(str(error)) from error

    async def start(self) -> None:
        """Nothing to prepare: the clients are opened by `worker.kubernetes_target`."""

    async def close(self) -> None:
        """Nothing held here: `worker.kubernetes_target` releases the clients."""
