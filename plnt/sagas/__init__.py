"""Temporal workflows and activities that deploy a WorkflowRun (pull, resolve, canary, smoke, promote)."""
