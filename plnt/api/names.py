"""plnt's API names as plain constants: group, version, kinds, plurals, finished phases.

Why a module of its own: the client, the CLI, the UI and the load harness need these
strings but parse no models, and every other module of `plnt.api` imports pydantic
(tens of milliseconds at start-up). Before this module they kept copies; now the copies
are imports of this one, and the models in `plnt/api/*` re-use these names too, so a
name that crosses the wire is spelled once. No I/O and no imports beyond the standard
library: `tests/api/test_names.py` checks that importing it leaves pydantic unloaded.
"""

from __future__ import annotations

GROUP = "plnt.work"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
"""`apiVersion` of every plnt kind (and of the Bench and invoke envelopes)."""

GROUP_PATH = f"/apis/{API_VERSION}"
"""Where the group's resources are served."""

# Kinds and their plurals (the resource names in paths and RBAC).
WORKFLOWRUN_KIND = "WorkflowRun"
WORKFLOWRUNS = "workflowruns"
INVOCATION_KIND = "Invocation"
INVOCATIONS = "invocations"
WORKFLOW_KIND = "Workflow"
WORKFLOWS = "workflows"
BACKEND_KIND = "PlntBackend"
BACKENDS = "plntbackends"
BENCH_KIND = "Bench"
"""A Bench is a request body (`/bench`), not a stored kind: it has no plural."""

INVOCATION_FINISHED_PHASES: tuple[str, ...] = ("Succeeded", "Failed", "Cancelled")
"""The phases an Invocation never leaves."""
