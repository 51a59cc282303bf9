"""WorkflowRun's runtime over HTTP: everything the API server does for this one kind.

Its subresources (`invoke` and `invocations`, `proxy`, `rollback`, `abort`, `promote`,
`retry`, `bench`, `scale`) are handed to the generic dispatcher by the composition root
(`routes.HTTP`); the forwarding to runners (`invoke`, `traffic`, `relay`) keeps its pooled
session and balancer in this package's AppKeys (`keys`); the deploy hooks (`deployhooks`)
submit every accepted change of a run to its saga. Nothing outside this package and the
composition root (`plnt.apiserver.app`) imports it. What the kind means (validation,
transitions, rollback's revision choice, the Scale mapping) is `plnt.registry.workflowruns`.
"""
