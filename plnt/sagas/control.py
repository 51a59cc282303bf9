"""What the API server may ask of the deploy sagas, without knowing Temporal.

The API server calls `DeployControl.submit` after every accepted write that changes a
WorkflowRun's desired state (creation, a new generation, the start of deletion) and
before it answers, so an acknowledged write always has a saga behind it. `submit` is
idempotent: submitting the same object twice signals the same saga twice, and the saga
ignores generations it has already seen. The Temporal implementation lives in
`plnt.sagas.starter`; the API server holds only this protocol so it can run without a
Temporal server (tests of the API machinery, `--no-sagas`).

Errors: `DeployUnavailable` when the saga service cannot be reached; the write has
already been stored, so the caller reports it and retries later (see
`plnt.sagas.starter.Reconciler`).

`BenchControl` is the same for the `/bench` subresource: start a run's bench workflow,
read its progress or result. A control that does not implement it (a test's in-memory
one) serves no benches. `BenchRunning` names the bench that keeps another from starting.

`InvocationControl` starts and cancels the workflow of an Invocation
(`plnt.sagas.invoking.workflow`): started after the Invocation's create, cancelled when it
is deleted; and lists the invocation workflows that run, so the API server can cancel
those whose Invocation is gone
(a delete whose cancel could not reach Temporal, then an API server restart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class DeployUnavailable(Exception):
    """The saga service (Temporal) could not be reached; the message says where and why."""


class DeployControl(Protocol):
    """The saga operations the request path needs."""

    async def submit(self, obj: dict[str, Any]) -> None:
        """Start the WorkflowRun's saga, or signal it with `obj`'s desired state."""
        ...

    async def abort(self, obj: dict[str, Any]) -> bool:
        """Cancel the in-flight deploy of `obj` (compensation runs); False if none is running."""
        ...

    async def promote(self, obj: dict[str, Any]) -> bool:
        """End the pause of `obj`'s canary now; False if no canary is pausing."""
        ...

    async def retry(self, obj: dict[str, Any]) -> bool:
        """Try `obj`'s failed deploy again now; False if none waits for a retry."""
        ...


class BenchRunning(Exception):
    """The run already has a bench in progress: `bench_id` names it."""

    def __init__(self, bench_id: str) -> None:
        super().__init__(f"bench {bench_id} is running")
        self.bench_id = bench_id


@runtime_checkable
class BenchControl(Protocol):
    """The bench operations the request path needs (`plnt.sagas.benching.workflow`)."""

    async def start_bench(self, obj: dict[str, Any], bench: dict[str, Any]) -> None:
        """Start the bench `bench` (a Bench as the API answers it: id in metadata.name, the
        spec with its inputs, the resolved revisions in status.targets) of the run `obj`.

        Raises `BenchRunning` when the run has one in progress, `DeployUnavailable` when
        Temporal cannot be reached.
        """
        ...

    async def bench(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The run's current or last bench as a Bench (phase, progress or results); None
        when Temporal has none (never benched, or its record has expired)."""
        ...


@dataclass(frozen=True, slots=True)
class RunningInvocation:
    """An invocation workflow that runs, by the Invocation its id names."""

    namespace: str
    name: str
    uid: str

    def metadata(self) -> dict[str, Any]:
        """The Invocation's identity as `cancel_invocation` reads it."""
        return {"metadata": {"namespace": self.namespace, "name": self.name, "uid": self.uid}}


@runtime_checkable
class InvocationControl(Protocol):
    """The Invocation operations the request path needs (`plnt.sagas.invoking.workflow`)."""

    async def start_invocation(self, obj: dict[str, Any]) -> None:
        """Start the Invocation `obj`'s workflow (id `invocation/NS/NAME/UID`); nothing
        happens when it runs or ran already. `DeployUnavailable` when Temporal cannot be
        reached."""
        ...

    async def cancel_invocation(self, obj: dict[str, Any]) -> None:
        """Cancel the Invocation `obj`'s workflow, which closes its call to the runner;
        nothing happens when none runs. Only `obj`'s namespace, name and uid are read.
        `DeployUnavailable` when Temporal cannot be reached."""
        ...

    async def running_invocations(self) -> list[RunningInvocation]:
        """The invocation workflows running now on this installation's task queue
        (finished calls waiting out their TTL included). Temporal's visibility lists them,
        which may lag a start by a moment: a workflow just started can be missing, one
        just ended still listed. `DeployUnavailable` when Temporal cannot be reached."""
        ...
