"""The Dockerfile the chart's image is built from, read as text (no Docker engine runs
here, so the image itself is not built by the tests)."""

from __future__ import annotations

import re
import tomllib

import helm_python

from tests.charts import rendering

DOCKERFILE = (rendering.REPO / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    return re.findall(rf"^{name}\s+(.+)$", DOCKERFILE, flags=re.MULTILINE)


def test_image_runs_plnt_serve_by_default_as_the_charts_non_root_uid() -> None:
    assert instructions("ENTRYPOINT") == ['["plnt"]']
    assert instructions("CMD") == ['["serve"]']
    assert instructions("USER") == ["65532:65532"]


def test_every_stage_starts_from_the_pinned_python_311_slim_image() -> None:
    (pinned,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, flags=re.MULTILINE)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", pinned)
    stages = instructions("FROM")
    assert len(stages) == 3
    assert all(stage.startswith("${PYTHON_IMAGE}") for stage in stages)


def test_build_context_keeps_what_the_wheel_needs_and_drops_the_rest() -> None:
    lines = (rendering.REPO / ".dockerignore").read_text().splitlines()
    ignored = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    for needed in ("pyproject.toml", "README.md", "plnt"):
        assert needed not in ignored
    for dropped in (".git", ".venv", "tests", "charts"):
        assert dropped in ignored
    copied = instructions("COPY")
    assert "pyproject.toml README.md ./" in copied and "plnt ./plnt" in copied


def test_chart_app_version_is_the_package_version(chart: helm_python.Chart) -> None:
    project = tomllib.loads((rendering.REPO / "pyproject.toml").read_text())["project"]
    assert chart.metadata["appVersion"] == project["version"]
