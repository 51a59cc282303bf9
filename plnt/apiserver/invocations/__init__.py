"""Invocation's runtime in the API server: its admission.

`admission.InvocationAdmission` (a `plnt.registry.hooks.ObjectAdmission`) checks, on
create, that the requester may also invoke the WorkflowRun named (an Invocation runs
it) and that the run exists, and sets the run as the Invocation's owner. The composition
root (`plnt.apiserver.app`) gives it to the Invocation store. Invocation has no
subresources of its own beyond `status`.
"""
