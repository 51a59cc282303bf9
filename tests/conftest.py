"""Settings for the whole suite.

Hypothesis runs with the `ci` profile unless `HYPOTHESIS_PROFILE` names another: no
per-example deadline (two shared cores make timings noise, and a slow example is not
a wrong one) and derandomized, so a failure found in CI reproduces on every rerun
instead of flaking. `HYPOTHESIS_PROFILE=explore` searches with fresh randomness.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The session's real model server (`model_server`), shared by every directory that needs one.
pytest_plugins = ["tests.support.model"]
