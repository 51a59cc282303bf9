"""The deploy saga's activities: every side effect of a deploy, each idempotent.

Activities reach plnt's objects only through its HTTP API (`plnt.client`), never
through storage, so a worker can run on any machine that can reach the API server
and Temporal. Replicas are made by a `Target`. Failures are raised as Temporal
`ApplicationError`s made by `failures.Failure.error`, whose `type` names the cause
(the enum the workflow reads back); the workflow's retry policies mark the ones
retrying cannot fix as non-retryable, and the attempt number travels in `details` so
the timeline shows it. Every activity takes one typed input and returns one typed
output (`values`); `pull_positional` serves the form that sagas which began before
typed inputs still schedule. Placement's activity (resolve) is `plnt.sagas.probing`'s,
the quality gate's (smoke, analyze, evaluate) `plnt.sagas.gating`'s: they share these
activities' clients (`plnt.sagas.worker` composes them).
"""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
from temporalio import activity

from plnt.api import names
from plnt.api.events import event_about
from plnt.api.workflowruns import TEARDOWN_FINALIZER, StepCacheSpec
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.client.events import EventPoster
from plnt.sagas import activitynames, heartbeats
from plnt.sagas import values as v
from plnt.sagas.activityfailures import fail, spec_failure
from plnt.sagas.failures import Failure
from plnt.sagas.invoking import activities as invoking
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets import interface as targets
from plnt.workflowspec import documents, verifying
from plnt.workflowspec import errors as spec_errors
from plnt.workflowspec.signers import SignaturePolicy

WORKFLOWRUNS = names.WORKFLOWRUNS
COMPONENT = "plnt-deploy"


def _secret_of(backend: v.Backend) -> targets.SecretKeyRef | None:
    if not backend.secret_name:
        return None
    # Admission stores the API's default key; "token" covers objects written without it.
    return targets.SecretKeyRef(backend.secret_name, backend.secret_key or "token")


def _backend_config(backend: v.Backend) -> targets.BackendConfig:
    """The resolved backend (its fallback, the pool's backends it may spill to) as the
    targets hand it to the runners."""
    return targets.BackendConfig(
        name=backend.name,
        type=backend.type,
        endpoint=backend.endpoint,
        model=backend.model,
        api_key_env=backend.api_key_env,
        credentials=_secret_of(backend),
        max_concurrency=backend.max_concurrency,
        fallback=None if backend.fallback is None else _backend_config(backend.fallback),
        spill=tuple(_backend_config(spill) for spill in backend.spill),
    )


class DeployActivities:
    """The activities, bound to one API client, the targets and one spec cache.

    `target` is the local target; `kubernetes`, when the worker can reach a cluster, the
    Kubernetes target. A request for a target the worker does not have fails for good
    with `TargetUnavailable`.
    """

    def __init__(
        self,
        *,
        api: PlntClient,
        target: targets.Target,
        specs: SpecCache,
        kubernetes: targets.Target | None = None,
        probe_timeout: float = 30.0,
        signatures: SignaturePolicy | None = None,
    ) -> None:
        self.api = api
        self.signatures = signatures
        """Trusted signers, and the namespaces whose specs must be signed by one."""
        self.target = target
        self.kubernetes = kubernetes
        self.specs = specs
        self.probe_timeout = probe_timeout
        self.backend_events = EventPoster(api)
        """Where backend probes record their transitions' Events, the resolve activity's
        and the worker's prober's alike, so repeats are counted into one Event."""
        self._session: aiohttp.ClientSession | None = None

    def all(self) -> list[Any]:
        """Every activity, for `Worker(activities=...)`."""
        return [
            self.report,
            self.pull,
            self.pull_positional,
            self.install,
            self.scale,
            self.retire,
            self.teardown,
            self.release,
            self.route,
        ]

    def http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.probe_timeout)
            )
        return self._session

    async def start(self) -> None:
        """Let the targets get ready (the local one pre-warms its runner server)."""
        await self.target.start()

    async def close(self) -> None:
        await self.target.close()
        if self._session is not None:
            await self._session.close()
        await self.api.close()

    # -- status and events ----------------------------------------------------------

    async def _current(self, run: v.RunRef) -> dict[str, Any] | None:
        """The run's object, or None when it is gone or was recreated (another uid)."""
        try:
            obj = await self.api.get_workflowrun(run.name, namespace=run.namespace)
        except client_errors.NotFound:
            return None
        return obj if obj.get("metadata", {}).get("uid") == run.uid else None

    @activity.defn(name=activitynames.REPORT)
    async def report(self, report: v.Report) -> None:
        """Write the saga's status fields (and an Event); a vanished object is not an error."""
        run = report.run
        for _ in range(5):
            obj = await self._current(run)
            if obj is None:
                return
            patch = {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "status": report.status,
            }
            try:
                obj = await self.api.patch_workflowrun_status(
                    run.name, patch, namespace=run.namespace
                )
                break
            except client_errors.Conflict:
                continue  # another writer in between: read again
            except client_errors.NotFound:
                return
        else:
            raise fail(Failure.CONFLICT, "status kept changing underneath", retryable=True)
        if report.event_reason:
            await self._event(
                obj,
                type=report.event_type or "Normal",
                reason=report.event_reason,
                message=report.event_message or "",
            )

    async def _event(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        event = event_about(obj, type=type, reason=reason, message=message, component=COMPONENT)
        path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/events"
        try:
            await self.api.request("POST", path, json=event)
        except (client_errors.Forbidden, client_errors.NotFound) as error:
            # A namespace being deleted refuses new content (kube's NamespaceLifecycle);
            # an Event is diagnostics, so the status written before it stands.
            activity.logger.info("event %s not recorded: %s", reason, error)

    # -- pull -------------------------------------------------------------------

    async def _verified(
        self, request: v.PullRequest, ref: str, digest: str, data: bytes
    ) -> verifying.Verified | None:
        """`data`'s signer verified offline, when the run or the policy requires one (None:
        none is required): the spec, its dataset and every sub-workflow it calls alike."""
        return await self.specs.verified(
            ref,
            digest,
            data,
            verify=request.verify,
            namespace=request.namespace,
            policy=self.signatures,
        )

    async def _pulled(
        self, request: v.PullRequest, ref: str, digest: str
    ) -> tuple[bytes, verifying.Verified | None]:
        """The artifact's bytes (digest checked) and its verified signer (`_verified`)."""
        data = await self.specs.ensure(ref, digest)
        return data, await self._verified(request, ref, digest, data)

    @activity.defn(name=activitynames.PULL_SPEC)
    async def pull(self, request: v.PullRequest) -> v.PullResult:
        """Fetch the spec, verify its digest and (when required) its signature, validate it,
        and keep it in the spec cache; the same for every sub-workflow it calls, down its
        tree, so a revision pins the whole tree."""
        try:
            # The signature before the parse: an untrusted spec is refused as untrusted.
            data, signed = await self._pulled(request, request.ref, request.digest)
            if signed is not None and request.dataset_ref and request.dataset_digest:
                await self._pulled(request, request.dataset_ref, request.dataset_digest)
            workflow = documents.parse_workflow(data)
            # A sub-workflow is held to the same signer as the spec that calls it.
            check = functools.partial(self._verified, request)
            await self.specs.bundle(data, digest=request.digest, workflow=workflow, check=check)
        except (spec_errors.SourceError, documents.SpecError) as error:
            raise spec_failure(error) from error
        return v.PullResult(
            signer=signed.signer if signed is not None else None,
            digest=request.digest,
            size=len(data),
            workflow=f"{workflow.metadata.name}@{workflow.metadata.version}",
            has_smoke=workflow.smoke is not None,
            attempt=activity.info().attempt,
        )

    # Sagas recorded before typed inputs schedule these names with positional arguments.

    @activity.defn(name=activitynames.PULL_POSITIONAL)
    async def pull_positional(self, ref: str, digest: str) -> v.PullResult:
        """`pull-spec`, as scheduled by sagas that began before typed activity inputs."""
        return await self.pull(v.PullRequest(ref, digest))

    # -- replicas -------------------------------------------------------------------

    async def _revision(self, request: v.InstallRequest) -> targets.Revision:
        try:
            data = await self.specs.ensure(request.ref, request.digest)
            # The pull verified the tree; here it is read back from the cache (or pulled
            # again by digest on a fresh worker) and handed to the runners with the spec.
            data = await self.specs.bundle(data, digest=request.digest)
        except (spec_errors.SourceError, documents.SpecError) as error:
            raise spec_failure(error) from error
        return targets.Revision(
            run=request.run,
            revision=request.revision,
            digest=request.digest,
            spec=data,
            backend=_backend_config(request.backend),
            replicas=request.replicas,
            cache=targets.CacheConfig.of(StepCacheSpec.model_validate(request.cache)),
            ref=request.ref,
            gpu_class=request.gpu_class,
        )

    def _target(self, name: str) -> targets.Target:
        if name == "local":
            return self.target
        if name == "kubernetes" and self.kubernetes is not None:
            return self.kubernetes
        raise fail(
            Failure.TARGET_UNAVAILABLE,
            f"spec.target {name!r} is not available: this worker has no cluster to deploy to"
            " (run plnt worker with --runner-chart in a cluster); use target: local",
        )

    @staticmethod
    def _installed(replicas: list[targets.Replica]) -> v.Installed:
        ready = [replica for replica in replicas if replica.ready]
        return v.Installed(
            endpoints=[replica.url for replica in ready],
            ready_replicas=len(ready),
            attempt=activity.info().attempt,
        )

    @activity.defn(name=activitynames.INSTALL)
    async def install(self, request: v.InstallRequest) -> v.Installed:
        """Ensure the revision's replicas run and are ready (adopting live ones); say
        whether the run has an HTTPRoute (checked before anything is installed)."""
        revision = await self._revision(request)
        target = self._target(request.target)
        route = self._route_of(target, request.run, request.route)
        try:
            async with heartbeats.steady() as beat:
                replicas = await target.install(revision, heartbeat=beat)
        except targets.InsufficientCapacity as error:
            # Not retried here: nodes come slowly; the saga tries again after its backoff.
            raise fail(Failure.INSUFFICIENT_CAPACITY, str(error)) from error
        except targets.CredentialsMissing as error:
            # Not retried here: the saga tries again later, as for a registry that is down.
            raise fail(Failure.CREDENTIALS_MISSING, str(error)) from error
        except targets.InstallFailed as error:
            raise fail(Failure.INSTALL_FAILED, str(error), retryable=True) from error
        installed = self._installed(replicas)
        installed.route = route
        return installed

    @staticmethod
    def _route_of(target: targets.Target, run: v.RunRef, spec: dict[str, Any] | None) -> str | None:
        if not isinstance(target, targets.Router):
            if spec is not None and spec.get("enabled", True):
                raise fail(Failure.ROUTE_UNAVAILABLE, "spec.route needs target: kubernetes")
            return None
        try:
            return target.route_of(run, spec)
        except targets.TargetError as error:  # routes.RouteUnavailable
            raise fail(Failure.ROUTE_UNAVAILABLE, str(error)) from error

    @activity.defn(name=activitynames.ROUTE)
    async def route(self, request: v.RouteRequest) -> v.Routed:
        """Move the run's HTTPRoute to `request.backends` (none: remove it); idempotent."""
        target = self.kubernetes if request.target == "kubernetes" else self.target
        if not isinstance(target, targets.Router):
            return v.Routed(None, "no HTTPRoute: the worker has no cluster")
        try:
            route = target.route_of(request.run, request.route)
            message = await target.route(request.run, request.route, request.backends)
        except targets.TargetError as error:
            raise fail(Failure.ROUTE_FAILED, str(error), retryable=True) from error
        return v.Routed(
            route if request.backends else None, message, attempt=activity.info().attempt
        )

    @activity.defn(name=activitynames.SCALE)
    async def scale(self, request: v.InstallRequest) -> v.Installed:
        """Resize the revision to `request.replicas` ready replicas."""
        revision = await self._revision(request)
        try:
            target = self._target(request.target)
            async with heartbeats.steady() as beat:
                replicas = await target.scale(revision, heartbeat=beat)
        except targets.CredentialsMissing as error:
            raise fail(Failure.CREDENTIALS_MISSING, str(error)) from error
        except targets.InstallFailed as error:
            raise fail(Failure.INSTALL_FAILED, str(error), retryable=True) from error
        return self._installed(replicas)

    @activity.defn(name=activitynames.RETIRE)
    async def retire(self, request: v.RetireRequest) -> None:
        """Stop every replica of one revision."""
        target = self.kubernetes if request.target == "kubernetes" else self.target
        if target is None:
            return  # a target this worker does not have installed nothing to retire
        await target.retire(request.run, request.revision)

    @activity.defn(name=activitynames.TEARDOWN)
    async def teardown(self, run: v.RunRef) -> None:
        """Delete the run's Invocations (cancelling their calls), then stop every replica of
        every revision of the run, on every target this worker has."""
        await invoking.delete_invocations_of(self.api, run)
        for target in (self.target, self.kubernetes):
            if target is not None:
                await target.teardown(run)

    @activity.defn(name=activitynames.RELEASE)
    async def release(self, run: v.RunRef) -> None:
        """Remove the teardown finalizer, so the deletion completes."""
        for _ in range(10):
            obj = await self._current(run)
            if obj is None:
                return
            finalizers = list(obj["metadata"].get("finalizers") or [])
            if TEARDOWN_FINALIZER not in finalizers:
                return
            index = finalizers.index(TEARDOWN_FINALIZER)
            path = self.api.object_path(WORKFLOWRUNS, run.name, namespace=run.namespace)
            patch = [
                {"op": "test", "path": "/metadata/uid", "value": run.uid},
                {
                    "op": "test",
                    "path": f"/metadata/finalizers/{index}",
                    "value": TEARDOWN_FINALIZER,
                },
                {"op": "remove", "path": f"/metadata/finalizers/{index}"},
            ]
            try:
                await self.api.request(
                    "PATCH", path, json=patch, content_type="application/json-patch+json"
                )
                return
            except (client_errors.Conflict, client_errors.Invalid):
                continue  # changed underneath (a failed test is 422): read again
            except client_errors.NotFound:
                return
        raise fail(Failure.CONFLICT, "finalizers kept changing underneath", retryable=True)
