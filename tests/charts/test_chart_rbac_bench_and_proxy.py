"""The chart's aggregated roles for the `bench` and `proxy` subresources.

kube-apiserver authorizes these before it proxies a request to plnt, so the chart's
grants are what users can do in a cluster: viewers follow a bench (`get
workflowruns/bench`) but start none; editors and admins start and follow benches and use
the OpenAI endpoint (`workflowruns/proxy`) with exactly the verbs `docs/openai.md` states
and discovery lists (`plnt/registry/workflowruns/definition.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from plnt.registry.workflowruns.definition import DEFINITION
from tests.charts.rendering import Rendered, aggregated, rbac_allows
from tests.support.plnt_server import REPO

Render = Callable[[str], Rendered]

GROUP = "plnt.work"
EVERY_VERB = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]


def granted(rules: list[dict[str, Any]], resource: str) -> set[str]:
    return {
        verb for verb in EVERY_VERB if rbac_allows(rules, group=GROUP, resource=resource, verb=verb)
    }


def discovered(subresource: str) -> set[str]:
    """The verbs discovery lists for `workflowruns/<subresource>`."""
    (found,) = [s for s in DEFINITION.subresources if s.name == subresource]
    return set(found.verbs)


def documented_proxy_verbs() -> set[str]:
    """What docs/openai.md says the chart folds into edit and admin for the proxy."""
    text = " ".join((REPO / "docs" / "openai.md").read_text().split())
    found = re.search(
        r"The chart folds `workflowruns/proxy` \(([^)]*)\) into the `edit` and `admin`", text
    )
    assert found, "docs/openai.md no longer says what the chart grants for the proxy"
    return set(re.findall(r"`(\w+)`", found.group(1)))


def test_view_follows_a_bench_but_starts_none_and_has_no_proxy(rendered: Render) -> None:
    rules = aggregated(rendered("default"), "view")
    assert rbac_allows(rules, group=GROUP, resource="workflowruns/bench", verb="get")
    assert granted(rules, "workflowruns/bench") == {"get", "list", "watch"}
    assert "create" not in granted(rules, "workflowruns/bench")
    assert granted(rules, "workflowruns/proxy") == set()
    assert granted(rules, "workflowruns/invoke") == set()


@pytest.mark.parametrize("to", ["edit", "admin"])
def test_edit_and_admin_start_and_follow_benches_and_use_the_proxy_as_documented(
    rendered: Render, to: str
) -> None:
    rules = aggregated(rendered("default"), to)
    bench = granted(rules, "workflowruns/bench")
    assert {"get", "create"} <= bench
    assert bench >= discovered("bench")
    assert not bench & {"update", "patch", "delete", "deletecollection"}
    proxy = granted(rules, "workflowruns/proxy")
    assert proxy == documented_proxy_verbs() == discovered("proxy") == {"get", "create"}
