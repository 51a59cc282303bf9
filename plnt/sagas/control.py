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
"""

from __future__ import annotations

from typing import Any, Protocol


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
