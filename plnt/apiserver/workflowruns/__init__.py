"""WorkflowRun's runtime over HTTP: what the API server serves for this one kind.

Its subresources (`invoke` and `invocationlog`, with `invocations`, its deprecated name;
`proxy`, `rollback`, `abort`, `promote`, `retry`, `bench`, `scale`) are handed to the
generic dispatcher through the kind's install (`install.INSTALL`, naming
`routes.SUBRESOURCES`), which the composition root lists; the forwarding to runners
(`invoke`, `traffic`, `relay`) keeps its pooled session and balancer in this package's
AppKeys (`keys`); the deploy hooks (`deployhooks`) submit every accepted change of a run to
its saga (an after-write hook the store runs; its warnings come back in the write's
result). Nothing else imports this package but the composition root (`plnt.apiserver.app`).
What the kind means (validation, transitions, rollback's revision choice, the Scale
mapping) and what it declares to the generic machinery (its subresources' schemas, which
are long-running, its default-policy grants) is `plnt.registry.workflowruns`; the gauges of
its benches (`benchgauges`) and the shadow senders (`mirroring`) run as the install's
cleanup contexts.
"""
