"""Fixtures for the saga tests: the local target on a fresh state directory.

`local_target_state_dir` stops every runner recorded under it when the test ends, and
then kills any runner process whose command line still names the directory, so no test
leaves a process behind even when it fails half-way.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plnt.sagas.targets import interface, local
from tests.support.local_target import CHAT_SPEC, MakeRevision, local_target_runner_pids
from tests.support.processes import kill_all


@pytest.fixture
def local_target_state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state directory whose runners are all stopped (and reaped) after the test."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    try:
        yield state_dir
    finally:
        local.stop_all(state_dir, timeout=5.0)
        kill_all(local_target_runner_pids(state_dir))


@pytest.fixture
def local_target(local_target_state_dir: Path) -> local.LocalTarget:
    """A local target on the test's state directory."""
    return local.LocalTarget(local_target_state_dir, ready_timeout=60.0, stop_timeout=5.0)


@pytest.fixture
def local_target_run() -> interface.RunRef:
    """A run key no other test uses."""
    return interface.RunRef(namespace="default", name="chat", uid=uuid.uuid4().hex[:12])


@pytest.fixture
def local_target_revision(local_target_run: interface.RunRef) -> MakeRevision:
    """`make(revision=1, replicas=1, spec=CHAT_SPEC)`: a revision of the chat example."""

    def make(
        revision: int = 1, *, replicas: int = 1, spec: bytes = CHAT_SPEC
    ) -> interface.Revision:
        return interface.Revision(
            run=local_target_run,
            revision=revision,
            digest="sha256:" + hashlib.sha256(spec).hexdigest(),
            spec=spec,
            backend=interface.BackendConfig(type="echo", latency_ms=1.0),
            replicas=replicas,
        )

    return make
