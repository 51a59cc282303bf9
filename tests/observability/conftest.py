"""Fixtures of the observability tests: a real Prometheus scraping a real `plnt up`.

One Prometheus per session (`tests.support.prometheus`); per module, one `plnt up` with
its embedded Temporal and in-process worker, and Prometheus configured with the scrape
job `plnt up` printed (file SD over `STATE/prometheus/*.json`), at a 1 s interval.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.blocking_api import Api
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import REPO, PlntServer, wait_for
from tests.support.prometheus import Observed, Prometheus, prometheus, up_targets
from tests.support.stack import kill_strays

__all__ = ["prometheus"]

SCRAPE_LINE = "Prometheus scrape_configs: - "
SLO_RULES = REPO / "charts" / "plnt" / "rules" / "slo.rules.yaml"
"""The chart's SLO rules, loaded as they ship (the PrometheusRule wraps this file)."""


def printed_job(output: list[str]) -> dict[str, Any]:
    """The scrape job plnt up printed on its one `Prometheus scrape_configs:` line."""
    lines = [line for line in output if line.startswith(SCRAPE_LINE)]
    assert len(lines) == 1, "".join(output)
    job: dict[str, Any] = json.loads(lines[0].removeprefix(SCRAPE_LINE))
    return job


@pytest.fixture(scope="module")
def observed(
    prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Observed]:
    state = tmp_path_factory.mktemp("plnt-observed")
    server = PlntServer(state, sagas=True)
    api: Api | None = None
    try:
        server.start()
        job = printed_job(server.output)
        # The printed job as is, scraped every second and its files re-read as often.
        job["scrape_interval"] = "1s"
        job["file_sd_configs"][0]["refresh_interval"] = "1s"
        prometheus.scrape([job], rule_files=[SLO_RULES])
        wait_for(
            lambda: up_targets(prometheus, "plnt-apiserver"),
            timeout=30,
            message="Prometheus scraping the API server",
        )
        api = Api(server.kubeconfig)
        namespace = create_namespace(server.url, server.pki_dir, f"o-{uuid.uuid4().hex[:8]}")
        yield Observed(state, server, api, prometheus, namespace, job)
    finally:
        prometheus.scrape([])
        if api is not None:
            api.close()
        server.stop()
        kill_strays(state)
