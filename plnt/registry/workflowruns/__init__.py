"""WorkflowRun's semantics: its definition, strategy, transition Events, rollback and scale.

Everything here is about the resource, never about HTTP or the saga: pure rules
(`strategy`, `transitions`, the revision choice in `rollback`, the Scale mapping in
`scale`) plus thin calls into `ResourceStore`, so every write path gets the same rules.
"""

from __future__ import annotations

from plnt.registry.workflowruns.definition import DEFINITION, with_teardown

__all__ = ["DEFINITION", "with_teardown"]
