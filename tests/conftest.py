"""Settings for the whole suite.

Hypothesis runs with the `ci` profile unless `HYPOTHESIS_PROFILE` names another: no
per-example deadline (two shared cores make timings noise, and a slow example is not
a wrong one) and derandomized, so a failure found in CI reproduces on every rerun
instead of flaking. `HYPOTHESIS_PROFILE=explore` searches with fresh randomness.

Every `plnt up` and `plnt serve` the tests start runs one API server process
(`PLNT_WORKERS=1`) unless a test passes `--workers` itself: the tests of one server's
behaviour read its pid, metrics and limits as one process's, and N processes per server
would multiply the suite's processes on a machine it shares. The worker processes have
tests of their own (tests/deploy/test_workers.py, tests/cluster/test_serve_workers.py).

Test packages share code only through `tests/support` (tests/test_layout.py checks it):
no test module or conftest imports another test module or a conftest.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PLNT_WORKERS", "1")

# Fixtures more than one test package uses, registered once here so each is defined once:
# a session or module fixture declared in two conftests would run twice (two Temporal dev
# servers, two model servers). A package's own conftest keeps what only its tests use, and
# may override a name for its tests (the client and CLI packages' `namespace`).
pytest_plugins = [
    "tests.support.model",  # the session's real model server (`model_server`)
    "tests.support.stack",  # one Temporal per session; `plnt up` and a worker per module
    "tests.support.runners",  # runners on loopback ports, their client session, spec files
    "tests.support.token_server",  # the in-process server of the client and CLI tests
]
