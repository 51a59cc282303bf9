"""Invocation's runtime in the API server: its admission and the hooks that run it.

`admission.InvocationAdmission` (a `plnt.registry.hooks.ObjectAdmission`) checks, on
create, that the requester may also invoke the WorkflowRun named (an Invocation runs
it) and that the run exists, and sets the run as the Invocation's owner.
`starting.InvocationHooks` (a `plnt.registry.hooks.AfterWrite`) starts the invocation's
Temporal workflow after its create and cancels it when the Invocation is deleted, and
retries starts Temporal refused. `metering` counts them by phase and times the finished
ones. Its install (`install.INSTALL`, which the composition root lists) gives these to
the Invocation store.
Invocation has no subresources of its own beyond `status`.
"""
