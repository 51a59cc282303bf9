"""Temporal workflows and activities that deploy a WorkflowRun (not written yet).

Pull, resolve, canary, smoke, promote; workflow code will do no I/O.
"""
