"""The bench harness: load generation and measurement against plnt endpoints.

Used by the `/bench` subresource's workflow, by `plnt bench`, and by the
deploy saga's canary analysis, so it lives in the bottom layer beside
`plnt.client` and imports only `plnt.api` and third-party libraries.

    results = await run(LoadPlan(duration_seconds=10, rate=200),
                        [Endpoint("stable", url_a), Endpoint("canary", url_b)])
"""

from plnt.harness.generator import run
from plnt.harness.plan import Endpoint, LoadPlan, PlanError, Progress
from plnt.harness.result import ERROR_CLASSES, BenchResult, Percentiles

__all__ = [
    "ERROR_CLASSES",
    "BenchResult",
    "Endpoint",
    "LoadPlan",
    "Percentiles",
    "PlanError",
    "Progress",
    "run",
]
