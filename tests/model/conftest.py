"""Tests against the real model: the session's model server (`tests/support/model.py`),
runners started as in `tests/runner` (their fixtures, shared), and for deploys on the
model the deploy tests' stack (one Temporal per session, an API server and worker per
module, `tests/deploy/conftest.py`)."""

from tests.deploy.conftest import api, kubectl, namespace, stack, temporal
from tests.runner.conftest import session, start_runner, write_spec

__all__ = [
    "api",
    "kubectl",
    "namespace",
    "session",
    "stack",
    "start_runner",
    "temporal",
    "write_spec",
]
