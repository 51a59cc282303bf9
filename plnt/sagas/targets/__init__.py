"""Where a WorkflowRun's runners run: the interface the deploy saga calls, and its targets.

The saga never knows how replicas are made; it calls `Target` operations from
activities. Every operation is idempotent, because Temporal retries activities and a
worker may die half-way: installing a revision that already has live replicas adopts
them instead of starting more.
"""
