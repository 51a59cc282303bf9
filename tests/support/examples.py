"""The repository's example workflows: the specs most tests serve, publish and deploy.

One place names them, so a test package that needs the chat or fan-out example reads the
path here instead of from another package's fixtures.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXAMPLE = EXAMPLES / "fanout.workflow.yaml"
"""The fan-out example: what the deploy tests publish and deploy unless told otherwise."""
