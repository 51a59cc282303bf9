"""WorkflowRun's runtime over HTTP: what the API server serves for this one kind.

Its subresources (`invoke` and `invocationlog`, with `invocations`, its deprecated name;
`proxy`, `rollback`, `abort`, `promote`, `retry`, `bench`, `scale`) are handed to the
generic dispatcher by the composition root (`routes.HTTP`); the forwarding to runners
(`invoke`, `traffic`, `relay`) keeps its pooled session and balancer in this package's
AppKeys (`keys`); the deploy hooks (`deployhooks`)
submit every accepted change of a run to its saga. Nothing generic imports it but the
composition root (`plnt.apiserver.app`), and `resources`, which collects the deploy
warnings of `deployhooks` until writes return them. What the kind means (validation,
transitions, rollback's revision choice, the Scale mapping) is `plnt.registry.workflowruns`;
the gauges of its benches run with the background loops (`controllers.benchgauges`).
"""
