"""Invocation's semantics: its definition, strategy and transition Events.

Pure rules, no I/O: an Invocation is one durable call of a WorkflowRun's workflow. Its
spec is immutable after create (as a Job's template is), its status is written by the
invocation's workflow, and its Events say when the call started and how it ended. What
needs the world (the run it names, who may invoke it, the workflow that runs it) is the
API server's (`plnt.apiserver.invocations`).
"""

from __future__ import annotations

from plnt.registry.invocations.definition import DEFINITION

__all__ = ["DEFINITION"]
