"""The deploy saga: one Temporal workflow per WorkflowRun, read top to bottom here.

The API server signal-with-starts `WorkflowRunController` (`workflow/controller.py`, id
`workflowrun/NS/NAME/UID`, through `plnt.sagas.starter`) on every write that changes
`generation`; the worker (`plnt.sagas.worker`) runs it with `activities.py`. Read in
this order:

1. `workflow/controller.py` the controller: the `desire` signal (the newest desired
   state kept, a superseded deploy cancelled), the `abort` and `promote` updates, what a
   generation needs (a deploy, a scale, the teardown), continue-as-new;
2. `workflow/intents.py` the signalled spec parsed once into the API's
   `WorkflowRunSpec`, so every default comes from `plnt.api`;
3. `workflow/deploys.py` one deploy's context (`Deploy`), the `Controls` the handlers
   set, and what a `Step` is (`enter`, `compensation`, `skip`, `run`);
4. `workflow/steps.py` the steps in order, `STEPS = (Pull, Resolve, Install, Smoke,
   Route, Analyze, Evaluate, Promote)` (the quality gate's three, smoke, analyze and
   evaluate, are `plnt.sagas.gating.workflow`'s), each calling its activity by name
   (`plnt.sagas.activitynames`) with its timeout and retry policy (`plnt.sagas.failures`)
   and moving the HTTPRoute by `plnt.sagas.routing`'s weights;
5. `workflow/rollout.py` walks the list: each undo pushed on the stack of
   `workflow/compensation.py` before its step runs, the stack unwound newest first on a
   failure or a cancellation, cleared at the commit point (promote);
6. `workflow/reporting.py` the `Reporter`, the one writer of status, timeline,
   conditions (`workflow/timeline.py`, pure) and Events, through the `report` local
   activity;
7. `workflow/scaling.py` scaling the stable revision in place (a replicas-only
   generation);
8. `activities.py` every side effect, idempotent, through `plnt.client` and a
   `plnt.sagas.targets` `Target`; the quality gate's is `plnt.sagas.gating.activities`, the
   probes `plnt.sagas.probing`.

Contract: `workflow/` is deterministic and does no I/O (import-linter's contract names
this package, every module in it included); its values cross the history as `plnt.sagas.values`.
Workflow, activity, signal and update names are registered explicitly and never
change, so recorded sagas replay (`tests/deploy/test_replay.py`). See docs/sagas.md.
"""
