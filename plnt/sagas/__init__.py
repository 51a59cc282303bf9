"""The deploy saga: Temporal workflows and activities that deploy a WorkflowRun.

Contract: the API server reaches this package only through `control.DeployControl`
(implemented by `starter.TemporalDeployControl`). Workflow code (`deploy`, `rollout`,
`reporting`, `timeline`, `values`) does no I/O and reads no clock but Temporal's;
activities (`activities`) do every side effect, reach plnt's objects only through
`plnt.client`, and make replicas only through a `targets.interface.Target`. Every
activity is idempotent. See docs/sagas.md.
"""
