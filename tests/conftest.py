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
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("PLNT_WORKERS", "1")

# The session's real model server (`model_server`), shared by every directory that needs one.
pytest_plugins = ["tests.support.model"]
