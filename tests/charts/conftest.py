"""Fixtures of the chart tests: the loaded chart and one render per values set."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import helm_python
import pytest

from tests.charts import rendering


@pytest.fixture(scope="session")
def chart() -> Iterator[helm_python.Chart]:
    with helm_python.Chart.load(rendering.CHART_DIR) as loaded:
        yield loaded


@pytest.fixture(scope="module")
def rendered(chart: helm_python.Chart) -> Callable[[str], rendering.Rendered]:
    """`rendered(name)`: the render of the named values set, made once per module."""
    cache: dict[str, rendering.Rendered] = {}

    def get(name: str) -> rendering.Rendered:
        if name not in cache:
            cache[name] = rendering.render(chart, rendering.VALUES_SETS[name])
        return cache[name]

    return get
