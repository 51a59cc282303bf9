"""A real Prometheus (Debian's `prometheus` package) as a child process, for the tests.

One Prometheus per session: it listens on a free loopback port, keeps its TSDB in a
temporary directory (never the system service's), and starts with no scrape jobs. A
test module points it at what it wants scraped with `Prometheus.scrape(jobs)`, which
rewrites the configuration file and asks for a reload (`--web.enable-lifecycle`), so no
test pays for another start. Scrapes run every second, and file SD files are re-read
as soon as they change (and every second besides).

`query` runs an instant PromQL query through the HTTP API and returns the result list;
a query Prometheus cannot parse raises `PromQLError` with its message. `up_targets`
lists a job's targets that were scraped successfully; `Observed` is a `plnt up` that the
Prometheus scrapes (what tests/observability builds per module).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from plnt.processes.ports import free_port
from tests.support.blocking_api import Api
from tests.support.plnt_server import ChildProcess, PlntServer, wait_for

SCRAPE_INTERVAL = "1s"


class PromQLError(AssertionError):
    """Prometheus refused a query (bad_data: it does not parse, or cannot be evaluated)."""


def binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise RuntimeError("prometheus not found: apt-get install prometheus (.ci/run does)")
    return found


@dataclass
class Prometheus:
    """A running Prometheus and its configuration file."""

    url: str
    config: Path
    child: ChildProcess

    def scrape(self, jobs: Sequence[Mapping[str, Any]], *, rule_files: Sequence[Path] = ()) -> None:
        """Replace the scrape jobs (and the rule files, evaluated every second) and reload;
        returns once Prometheus has the new config."""
        document: dict[str, Any] = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "1s"},
            "scrape_configs": [dict(job) for job in jobs],
        }
        if rule_files:
            document["rule_files"] = [str(path) for path in rule_files]
        self.config.write_text(yaml.safe_dump(document, sort_keys=False))
        status, text = _http("POST", f"{self.url}/-/reload")
        assert status == 200, text
        wanted = {job["job_name"] for job in jobs}
        loaded = self._get("/api/v1/status/config")["yaml"]
        configured = {job["job_name"] for job in yaml.safe_load(loaded).get("scrape_configs") or []}
        assert wanted <= configured, loaded

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector's samples, or one scalar as a sample)."""
        query = urllib.parse.urlencode({"query": expr})
        body = json.loads(_http("GET", f"{self.url}/api/v1/query?{query}")[1])
        if body.get("status") != "success":
            raise PromQLError(f"{expr!r}: {body.get('errorType')}: {body.get('error')}")
        data = body["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def rule_groups(self) -> list[dict[str, Any]]:
        """The loaded rule groups with each rule's health and last error."""
        return list(self._get("/api/v1/rules")["groups"])

    def targets(self) -> list[dict[str, Any]]:
        """The active scrape targets with their labels and health."""
        return list(self._get("/api/v1/targets?state=active")["activeTargets"])

    def _get(self, path: str) -> Any:
        body = json.loads(_http("GET", f"{self.url}{path}")[1])
        assert body.get("status") == "success", body
        return body["data"]


def _http(method: str, url: str) -> tuple[int, str]:
    """(status, body) of one request; an HTTP error status is an answer, not an exception."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def start(directory: Path) -> Prometheus:
    """Start Prometheus with its config and TSDB under `directory`; ready when it answers."""
    config = directory / "prometheus.yml"
    config.write_text(
        yaml.safe_dump({"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": []})
    )
    port = free_port()
    argv = [
        binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        "--storage.tsdb.retention.time=1h",
    ]
    # Prometheus logs to stderr (merged into the collected output) and says when it has
    # started; readiness is its /-/ready endpoint, polled after that.
    child = ChildProcess(argv, "Starting Prometheus", "prometheus", start_timeout=30.0)
    child.start()
    prometheus = Prometheus(f"http://127.0.0.1:{port}", config, child)
    try:
        wait_for(lambda: _ready(prometheus.url), timeout=30, message="Prometheus /-/ready")
    except BaseException:
        child.stop()
        raise
    return prometheus


def _ready(url: str) -> bool:
    try:
        return _http("GET", f"{url}/-/ready")[0] == 200
    except OSError:
        return False


def running(directory: Path) -> Iterator[Prometheus]:
    """A generator for a fixture: Prometheus while it runs, stopped (and reaped) after."""
    prometheus = start(directory)
    try:
        yield prometheus
    finally:
        prometheus.child.stop()


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """One real Prometheus for the session (import this fixture into a conftest)."""
    yield from running(tmp_path_factory.mktemp("prometheus"))


@dataclass
class Observed:
    """A plnt up that a Prometheus scrapes, with one namespace for the module."""

    state_dir: Path
    server: PlntServer
    api: Api
    prometheus: Prometheus
    namespace: str
    job: dict[str, Any]


def up_targets(prometheus: Prometheus, job: str) -> list[dict[str, Any]]:
    """The active targets of `job` that Prometheus scraped successfully."""
    return [
        target
        for target in prometheus.targets()
        if target["labels"].get("job") == job and target["health"] == "up"
    ]
