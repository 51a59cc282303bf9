"""`DeployControl` on Temporal: signal-with-start from the request path.

`submit` is one signal-with-start RPC: it starts the run's controller workflow if it
is not running and delivers the desired state either way, atomically, so the API
server never needs to know whether a saga exists. The workflow id comes from the
object's namespace, name and uid (`values.workflow_id`), which makes repeated
submissions idempotent and a recreated object a new saga.

Errors: every Temporal RPC failure becomes `control.DeployUnavailable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import client as temporal_client
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from plnt.api.workflowruns import ROLLBACK_GENERATION_ANNOTATION, ROLLBACK_TO_ANNOTATION
from plnt.sagas import deploy
from plnt.sagas import values as v
from plnt.sagas.control import DeployUnavailable


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
