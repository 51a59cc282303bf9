"""Tests against the real model: the session's model server (`tests/support/model.py`) and
runners started as in `tests/runner` (their fixtures, shared)."""

from tests.runner.conftest import session, start_runner, write_spec

__all__ = ["session", "start_runner", "write_spec"]
