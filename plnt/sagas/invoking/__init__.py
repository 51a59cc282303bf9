"""The invocation saga: one durable call of a WorkflowRun's workflow per Invocation.

`workflow` is the workflow (`Invocation`, deterministic, no I/O: import-linter checks it,
as it runs outside Temporal's sandbox; docs/sagas.md says why); `activities` call a
runner and write the Invocation's status, with the revision choice in `pinning`, the
stream reading and resumption in `resuming` and the status writes in `recording`.
Names are registered explicitly and never change, so recorded invocations replay.
"""
