"""The bench saga: one durable load test of a WorkflowRun's revisions (`POST …/bench`).

`workflow` is the workflow (`Bench`, deterministic, no I/O: import-linter checks it);
`activities` measure with `plnt.harness` and write `status.lastBench`, sharing the deploy
activities' clients. Workflow and activity names are registered explicitly and never
change, so recorded benches replay.
"""
