"""plnt's durable processes on Temporal: one sub-package per saga, what they share beside them.

Contract: the API server reaches this package only through `control` (the
`DeployControl`, `BenchControl` and `InvocationControl` protocols it calls) and `starter`
(their Temporal implementation). Each saga's workflow side lives in its package's
`workflow` module or sub-package (`deploying.workflow`, `benching.workflow`,
`invoking.workflow`): deterministic, no I/O, no clock but Temporal's, which
import-linter checks by that name. Everything else here is activity side: idempotent,
reaching plnt's objects only through `plnt.client` and replicas only through a
`targets.interface.Target`. See docs/sagas.md.

* `deploying/` the deploy saga, one controller workflow per WorkflowRun (start here);
* `benching/` the `/bench` subresource's workflow and its activities;
* `invoking/` one durable call per Invocation;
* `gating/` the quality gate's scoring, evaluation, judging and shadow pairs;
* `probing/` probing runners and PlntBackends, and backends' status transitions;
* shared: `values` (the histories' wire types; `RunRef`, re-exported from
  `plnt.api.runs`), `failures`, `activitynames`, `routing` (HTTPRoute weights),
  `control`, `starter`, `worker` and `serving` (`plnt worker`), `metrics`,
  `heartbeats`, `speccache`, `placement`, `targets/`.
"""
