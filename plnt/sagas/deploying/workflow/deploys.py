"""The shape of one deploy: its context, the controls it obeys, and what a step is.

A deploy is an ordered list of `Step`s (`steps.STEPS`) walked by `rollout.roll_out`
over one `Deploy` context. A step says how it begins (`enter`), what undoes it
(`compensation`, registered before it runs), whether it has nothing to do this time
(`skip`) and does its work (`run`); it never writes status — the walker tells the
`Reporter`. Adding a step (a rollout wait, a bench gate) is one new class and one new
entry in the list. Workflow code: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow.compensation import Compensation, CompensationStack
    from plnt.sagas.deploying.workflow.intents import Intent
    from plnt.sagas.deploying.workflow.reporting import Outcome, Reporter


@dataclass
class Controls:
    """What the controller's signal and update handlers set, and the running deploy reads."""

    desired: Intent | None = None
    """The newest desired state (or the deletion)."""
    in_flight: Intent | None = None
    """The generation being deployed right now."""
    interrupt: str | None = None
    """Why the deploy in flight is being cancelled: "Aborted" or "Superseded"."""
    committing: bool = False
    """Promotion (or compensation) runs: nothing interrupts the deploy any more."""
    pausing: bool = False
    """The canary holds its weight until the pause ends."""
    skip_pause: bool = False
    """`promote` asked to end the pause now."""
    retry_now: bool = False
    """`retry` asked to try a failed generation again now, not after the backoff."""

    def settle(self) -> None:
        """The deploy in flight is over, however it ended."""
        self.in_flight, self.committing = None, False
        self.pausing = self.skip_pause = False


@dataclass
class Deploy:
    """One deploy of one revision, and what its steps have found so far."""

    intent: Intent
    revision: int
    state: v.ControllerState
    reporter: Reporter
    controls: Controls
    compensations: CompensationStack = field(default_factory=CompensationStack)
    pulled: v.PullResult | None = None
    backend: v.Backend | None = None
    installed: v.Installed | None = None

    @property
    def ref(self) -> str:
        return self.intent.spec.workflow.ref

    @property
    def digest(self) -> str:
        return self.intent.spec.workflow.digest

    def pull_request(self) -> v.PullRequest:
        """The pull of the spec, with the signer it must have and the dataset it names."""
        evaluation = self.intent.evaluation
        dataset = evaluation.dataset if evaluation is not None else None
        return v.PullRequest(
            self.ref,
            self.digest,
            namespace=self.state.run.namespace,
            verify=self.verify,
            dataset_ref=dataset.ref if dataset is not None else None,
            dataset_digest=dataset.digest if dataset is not None else None,
        )

    @property
    def verify(self) -> dict[str, Any] | None:
        """The run's `spec.workflow.verify` on the wire (None: no signer named)."""
        verify = self.intent.spec.workflow.verify
        return None if verify is None else verify.to_wire()

    @property
    def replicas(self) -> int:
        """Replicas to start for the canary: at least one, whatever `spec.replicas` says."""
        return max(1, self.intent.spec.replicas)

    def resolved(self) -> v.Backend:
        assert self.backend is not None, "resolve runs before the steps that need a backend"
        return self.backend

    def canary(self) -> v.Installed:
        assert self.installed is not None, "install runs before the steps that need the canary"
        return self.installed


class Step:
    """One step of a deploy. Subclasses set the names and override what they need."""

    name: ClassVar[str]
    """Its entry in the timeline (`status.saga`)."""
    phase: ClassVar[str]
    """`status.phase` while it runs."""
    done: ClassVar[str]
    """The reason of the Normal Event when it succeeds."""
    fails_as: ClassVar[str]
    """The condition reason when it fails with a failure that has no reason of its own."""
    commits: ClassVar[bool] = False
    """The commit point: once it begins, the compensation stack is cleared."""

    def skip(self, deploy: Deploy) -> str | None:
        """Why the step has nothing to do this time (recorded as Skipped), or None."""
        return None

    def compensation(self, deploy: Deploy) -> Compensation | None:
        """The undo to register before the step runs, or None."""
        return None

    def enter(self, deploy: Deploy) -> str:
        """What the timeline says while the step runs (and any change before it is shown)."""
        raise NotImplementedError

    async def run(self, deploy: Deploy) -> Outcome:
        raise NotImplementedError
