"""`DeployControl` on Temporal: signal-with-start from the request path.

`submit` is one signal-with-start RPC: it starts the run's controller workflow if it
is not running and delivers the desired state either way, atomically, so the API
server never needs to know whether a saga exists. The workflow id comes from the
object's namespace, name and uid (`values.workflow_id`), which makes repeated
submissions idempotent and a recreated object a new saga.

`start_bench` and `bench` do the same for the `/bench` subresource (`control.BenchControl`):
one start of the run's `bench.BenchWorkflow`, whose workflow id is the run's, so Temporal
itself refuses a second bench while one runs (`control.BenchRunning` names it); and one
describe of that id, which reads the bench's progress from its measuring activity's last
heartbeat (so it answers even while no worker runs) or its result once it is done.

`start_invocation` and `cancel_invocation` serve Invocations (`control.InvocationControl`):
one start of the Invocation's `invocation.InvocationWorkflow` (id `invocation/NS/NAME/UID`;
a second start finds it running, or finished, and changes nothing), one cancel of it, and
`running_invocations`, one visibility query (`WorkflowType`, `ExecutionStatus`, `TaskQueue`:
the task queue keeps another installation's invocations, on the same Temporal namespace,
out of the answer).

Errors: every Temporal RPC failure becomes `control.DeployUnavailable`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import client as temporal_client
from temporalio import common as temporal_common
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from plnt.api import bench as api_bench
from plnt.api.invocations import DEFAULT_TIMEOUT_SECONDS, DEFAULT_TTL_SECONDS_AFTER_FINISHED
from plnt.api.workflowruns import ROLLBACK_GENERATION_ANNOTATION, ROLLBACK_TO_ANNOTATION
from plnt.sagas import values as v
from plnt.sagas.benching import workflow as benches
from plnt.sagas.control import BenchRunning, DeployUnavailable, RunningInvocation
from plnt.sagas.deploying.workflow import controller as deploy
from plnt.sagas.invoking import workflow as invocations


def desired_of(obj: dict[str, Any]) -> v.Desired:
    """The desired state an accepted write left, as the workflow's `desire` signal takes it."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    rollback = annotations.get(ROLLBACK_TO_ANNOTATION)
    # The annotation describes the write that set it: a later edit keeps the annotation
    # but not the generation it names.
    if annotations.get(ROLLBACK_GENERATION_ANNOTATION) != str(meta.get("generation")):
        rollback = None
    return v.Desired(
        run=v.RunRef(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))),
        generation=int(meta.get("generation") or 1),
        spec=dict(obj.get("spec") or {}),
        deleting=bool(meta.get("deletionTimestamp")),
        rollback_to=int(rollback) if rollback and str(rollback).isdigit() else None,
    )


class TemporalDeployControl:
    """Starts and signals `WorkflowRunController` workflows."""

    def __init__(self, client: temporal_client.Client, *, task_queue: str = v.TASK_QUEUE) -> None:
        self.client = client
        self.task_queue = task_queue

    async def submit(self, obj: dict[str, Any]) -> None:
        desired = desired_of(obj)
        run = desired.run
        try:
            await self.client.start_workflow(
                deploy.WorkflowRunController.run,
                v.ControllerState(run=run),
                id=v.workflow_id(run.namespace, run.name, run.uid),
                task_queue=self.task_queue,
                start_signal="desire",
                start_signal_args=[desired],
            )
        except RPCError as error:
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error

    async def abort(self, obj: dict[str, Any]) -> bool:
        return await self._update(obj, "abort")

    async def promote(self, obj: dict[str, Any]) -> bool:
        return await self._update(obj, "promote")

    async def retry(self, obj: dict[str, Any]) -> bool:
        return await self._update(obj, "retry")

    async def _update(self, obj: dict[str, Any], update: str) -> bool:
        """Run one of the saga's yes/no updates (by name); False when there is no saga."""
        run = desired_of(obj).run
        handle = self.client.get_workflow_handle(v.workflow_id(run.namespace, run.name, run.uid))
        try:
            return bool(await handle.execute_update(update, result_type=bool))
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error
        except temporal_client.WorkflowUpdateFailedError:
            return False

    def _where(self) -> str:
        return str(self.client.service_client.config.target_host)

    # -- invocations ------------------------------------------------------------------

    async def start_invocation(self, obj: dict[str, Any]) -> None:
        request = invocation_request(obj)
        ref = request.invocation
        try:
            await self.client.start_workflow(
                invocations.InvocationWorkflow.run,
                request,
                id=invocations.workflow_id(ref.namespace, ref.name, ref.uid),
                task_queue=self.task_queue,
                id_reuse_policy=temporal_common.WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=temporal_common.WorkflowIDConflictPolicy.USE_EXISTING,
                # A worker on this very client (plnt up's) gets the first workflow task in
                # the start's answer, not through the task queue: one hop fewer on the way
                # to the call. Without such a worker the start is an ordinary one.
                request_eager_start=True,
            )
        except WorkflowAlreadyStartedError:
            return  # it ran already: an Invocation is called once
        except RPCError as error:
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error

    async def cancel_invocation(self, obj: dict[str, Any]) -> None:
        ref = invocation_request(obj).invocation
        handle = self.client.get_workflow_handle(
            invocations.workflow_id(ref.namespace, ref.name, ref.uid)
        )
        try:
            await handle.cancel()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return  # never started, or finished: nothing to cancel
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error

    async def running_invocations(self) -> list[RunningInvocation]:
        query = (
            f"WorkflowType = '{invocations.WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' "
            f"AND TaskQueue = '{self.task_queue}'"
        )
        found: list[RunningInvocation] = []
        try:
            async for execution in self.client.list_workflows(query):
                ref = invocations.ref_of_workflow_id(execution.id)
                if ref is not None:
                    found.append(RunningInvocation(ref.namespace, ref.name, ref.uid))
        except RPCError as error:
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error
        return found

    # -- benches ----------------------------------------------------------------------

    async def start_bench(self, obj: dict[str, Any], bench: dict[str, Any]) -> None:
        run = desired_of(obj).run
        request = bench_request(run, bench)
        workflow_id = benches.workflow_id(run.namespace, run.name, run.uid)
        for _ in range(3):
            try:
                await self.client.start_workflow(
                    benches.BenchWorkflow.run,
                    request,
                    id=workflow_id,
                    task_queue=self.task_queue,
                    id_conflict_policy=temporal_common.WorkflowIDConflictPolicy.FAIL,
                    memo={benches.BENCH_MEMO: memo_of(bench)},
                )
                return
            except WorkflowAlreadyStartedError:
                running = await self._running_bench(workflow_id)
                if running is not None:
                    raise BenchRunning(running) from None
                # It ended between the start and the describe: start again.
            except RPCError as error:
                raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error
        raise DeployUnavailable(f"Temporal at {self._where()}: the bench could not be started")

    async def _running_bench(self, workflow_id: str) -> str | None:
        """The id of the bench running under `workflow_id`, or None when none runs."""
        described = await self._describe(workflow_id)
        if described is None or described.status != temporal_client.WorkflowExecutionStatus.RUNNING:
            return None
        memo = await described.memo_value(benches.BENCH_MEMO, default={})
        return str(((memo or {}).get("metadata") or {}).get("name") or "(unknown)")

    async def _describe(
        self, workflow_id: str
    ) -> temporal_client.WorkflowExecutionDescription | None:
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            return await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error

    async def bench(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        run = desired_of(obj).run
        workflow_id = benches.workflow_id(run.namespace, run.name, run.uid)
        described = await self._describe(workflow_id)
        if described is None:
            return None
        memo = await described.memo_value(benches.BENCH_MEMO, default=None)
        if not isinstance(memo, dict):
            return None
        view: dict[str, Any] = copy.deepcopy(memo)
        status = view.setdefault("status", {})
        state = described.status
        if state == temporal_client.WorkflowExecutionStatus.RUNNING:
            pending = described.raw_description.pending_activities
            measuring = next(
                (a for a in pending if a.activity_type.name == benches.MEASURE_ACTIVITY), None
            )
            if measuring is None:
                status.update(phase="Running", message="measured; recording the result")
            else:
                status.update(await self._progress(measuring))
            return view
        if state == temporal_client.WorkflowExecutionStatus.COMPLETED:
            handle = self.client.get_workflow_handle(
                workflow_id, run_id=described.run_id, result_type=benches.BenchOutcome
            )
            try:
                outcome = await handle.result()
            except RPCError as error:
                raise DeployUnavailable(f"Temporal at {self._where()}: {error.message}") from error
            status.update(api_bench.status_of_record(outcome.record))
            return view
        status.update(
            phase="Failed",
            message=f"the bench's workflow ended {state.name.lower() if state else 'unknown'}",
        )
        return view

    async def _progress(self, measuring: PendingActivityInfo) -> dict[str, Any]:
        """The Bench status fields a measurement in progress shows (from its heartbeat)."""
        attempt = int(measuring.attempt or 1)
        decoded = (
            await self.client.data_converter.decode(measuring.heartbeat_details.payloads)
            if measuring.HasField("heartbeat_details")
            else []
        )
        beat = decoded[0] if decoded and isinstance(decoded[0], dict) else {}
        started = measuring.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        fields: dict[str, Any] = {
            "phase": "Running" if started or attempt > 1 else "Pending",
            "attempt": attempt,
            "restarts": attempt - 1,
        }
        if int(beat.get("attempt") or 0) == attempt:
            fields["progress"] = list(beat.get("progress") or [])
            fields["message"] = (
                f"measuring ({float(beat.get('elapsedSeconds') or 0.0):.1f} s since the start"
                " of the warm-up)"
            )
        elif attempt > 1:
            lost = measuring.last_failure.message if measuring.HasField("last_failure") else ""
            fields["message"] = (
                f"the worker measuring it was lost ({lost or 'no heartbeat'});"
                f" the measurement starts again (attempt {attempt})"
            )
        return fields


@dataclass(frozen=True)
class TemporalConnection:
    """How to reach Temporal: `plnt serve` and `plnt worker` take the same flags."""

    address: str
    namespace: str = "default"
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    api_key_file: Path | None = None

    def tls(self) -> TLSConfig | None:
        """TLS (with a CA) or mTLS (with a client pair) when any file is given."""
        files = (self.tls_ca_file, self.tls_cert_file, self.tls_key_file)
        if not any(files):
            return None
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise DeployUnavailable(
                "--temporal-tls-cert-file and --temporal-tls-key-file go together"
            )
        ca, cert, key = (path.read_bytes() if path else None for path in files)
        return TLSConfig(server_root_ca_cert=ca, client_cert=cert, client_private_key=key)

    def files(self) -> dict[str, Path]:
        """The files named, by flag (checked before anything starts)."""
        named = {
            "--temporal-tls-ca-file": self.tls_ca_file,
            "--temporal-tls-cert-file": self.tls_cert_file,
            "--temporal-tls-key-file": self.tls_key_file,
            "--temporal-api-key-file": self.api_key_file,
        }
        return {flag: path for flag, path in named.items() if path is not None}

    def api_key(self) -> str | None:
        return self.api_key_file.read_text().strip() if self.api_key_file else None

    async def connect(self) -> temporal_client.Client:
        """A client; `DeployUnavailable` naming the address or the file when it cannot."""
        try:
            tls, api_key = self.tls(), self.api_key()
        except OSError as error:
            raise DeployUnavailable(f"cannot read {error.filename}: {error.strerror}") from error
        return await connect(self.address, namespace=self.namespace, tls=tls, api_key=api_key)


async def connect(
    address: str,
    *,
    namespace: str = "default",
    tls: TLSConfig | None = None,
    api_key: str | None = None,
) -> temporal_client.Client:
    """A Temporal client (TLS or mTLS with `tls`, Temporal Cloud style with `api_key`);
    `DeployUnavailable` naming the address when it cannot connect."""
    try:
        return await temporal_client.Client.connect(
            address, namespace=namespace, tls=tls, api_key=api_key
        )
    except RuntimeError as error:  # the SDK reports connection failures as RuntimeError
        raise DeployUnavailable(
            f"cannot connect to Temporal at {address}: {_reason(error)}"
        ) from error


def _reason(error: RuntimeError) -> str:
    """The SDK's transport error in a few words (its full text is a Rust debug dump)."""
    text = str(error)
    for needle, reason in (
        ("ConnectionRefused", "connection refused"),
        ("TimedOut", "timed out"),
        ("dns error", "the host name does not resolve"),
    ):
        if needle in text:
            return reason
    return text


def invocation_request(obj: dict[str, Any]) -> invocations.InvocationRequest:
    """The invocation workflow's input from a stored Invocation: its identity, its spec
    (defaults applied at admission) and the run it was admitted for (its controller owner)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    owner = next(
        (
            ref
            for ref in meta.get("ownerReferences") or []
            if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "WorkflowRun"
        ),
        {},
    )
    ttl = spec.get("ttlSecondsAfterFinished")
    return invocations.InvocationRequest(
        invocation=invocations.InvocationRef(
            str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid"))
        ),
        run=str(spec.get("workflowRun") or ""),
        run_uid=str(owner.get("uid") or ""),
        inputs=dict(spec.get("inputs") or {}),
        revision=str(spec.get("revision") or "stable"),
        timeout_seconds=int(spec.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS),
        ttl_seconds_after_finished=int(
            ttl if ttl is not None else DEFAULT_TTL_SECONDS_AFTER_FINISHED
        ),
    )


def memo_of(bench: dict[str, Any]) -> dict[str, Any]:
    """The Bench as the workflow's memo keeps it: the inputs counted, not copied."""
    kept = copy.deepcopy(bench)
    spec = kept.get("spec") or {}
    inputs = spec.pop("inputs", None)
    if inputs is not None:
        spec["inputCount"] = len(inputs) if isinstance(inputs, list) else 1
    return kept


def bench_request(run: v.RunRef, bench: dict[str, Any]) -> benches.BenchRequest:
    """The workflow's input from the Bench the API server built."""
    status = bench.get("status") or {}
    return benches.BenchRequest(
        run=run,
        bench_id=str(bench["metadata"]["name"]),
        spec=dict(bench.get("spec") or {}),
        targets=[
            benches.TargetRef(label=str(t["label"]), revision=int(t["revision"]))
            for t in status.get("targets") or []
        ],
        start_time=str(status.get("startTime") or ""),
    )
