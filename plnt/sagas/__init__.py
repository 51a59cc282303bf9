"""Temporal workflows and activities that deploy a WorkflowRun.

Pull, resolve, canary, smoke, promote; workflow code does no I/O.
"""
