"""The chart's workflow catalog: its sources in a ConfigMap the API server reads, and
read-only RBAC for it in view, edit and admin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plnt.registry.workflows import sources
from tests.charts import rendering
from tests.charts.rendering import READ, WRITE, Rendered, aggregated, rbac_allows

Render = Callable[[str], Rendered]
API = "plnt-apiserver"


def test_sources_become_a_configmap_the_api_server_reads_at_every_refresh(
    rendered: Render,
) -> None:
    r = rendered("catalog")
    deployment = r.one("Deployment", API)
    args = rendering.flags(rendering.container(deployment, "apiserver")["args"][1:])

    path = args["catalog-sources"]
    assert path is not None and args["catalog-refresh"] == "30"
    mount, volume = rendering.mount_of(deployment, "apiserver", path)
    assert "subPath" not in mount  # a subPath mount never sees the ConfigMap change
    configmap = r.one("ConfigMap", volume["configMap"]["name"])
    parsed = sources.parse(configmap["data"][path.rsplit("/", 1)[-1]])
    assert parsed == (
        sources.CatalogSource("oci://registry.example.com/team/summarize", ("default",)),
        sources.CatalogSource("s3://specs/prod/", ("default", "team-a")),
    )


def test_without_sources_there_is_no_configmap_and_no_sources_flag(rendered: Render) -> None:
    r = rendered("default")
    args = rendering.flags(rendering.container(r.one("Deployment", API), "apiserver")["args"][1:])

    assert "catalog-sources" not in args
    assert not [c for c in r.all("ConfigMap") if c["metadata"]["name"].endswith("-catalog")]


@pytest.mark.parametrize("to", ["view", "edit", "admin"])
def test_every_role_reads_the_catalog_and_none_writes_it(rendered: Render, to: str) -> None:
    rules = aggregated(rendered("default"), to)

    for verb in READ:
        assert rbac_allows(rules, group="plnt.work", resource="workflows", verb=verb), verb
    for verb in WRITE:
        assert not rbac_allows(rules, group="plnt.work", resource="workflows", verb=verb), verb
