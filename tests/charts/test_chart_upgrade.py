"""`helm upgrade` keeps the CA and certificates the chart generated at install.

Rendered cluster-aware (`helm_python.Config.render`, the render an upgrade does)
against `kube_standin`, which answers the chart's `lookup` of its Secrets with the
Secrets of a previous render, as a cluster would after the install.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import helm_python
import pytest

from tests.charts import rendering
from tests.charts.kube_standin import KubeStandin, kube_standin
from tests.charts.rendering import NAMESPACE, RELEASE, Rendered

CHART_SECRETS = ["plnt-apiserver-tls", "plnt-etcd-server-tls", "plnt-etcd-client-tls"]


@pytest.fixture(scope="module")
def standin() -> Iterator[KubeStandin]:
    with kube_standin() as state:
        yield state


@pytest.fixture(scope="module")
def helm_config(standin: KubeStandin) -> Iterator[helm_python.Config]:
    with helm_python.Config(kube_apiserver=standin.url, namespace=NAMESPACE) as config:
        yield config


@pytest.fixture(scope="module")
def installed(chart: helm_python.Chart) -> Rendered:
    """What the install created (an offline render: nothing to look up yet)."""
    return rendering.render(chart, None)


def upgrade_render(
    config: helm_python.Config, chart: helm_python.Chart, values: dict[str, Any] | None = None
) -> Rendered:
    manifests = config.render(chart, values, name=RELEASE, namespace=NAMESPACE, is_upgrade=True)
    return rendering.parse(manifests)


def keep(standin: KubeStandin, r: Rendered, *, drop_key: str | None = None) -> None:
    standin.secrets.clear()
    for name in CHART_SECRETS:
        secret = r.one("Secret", name)
        data = {k: v for k, v in secret["data"].items() if k != drop_key}
        standin.secrets[(NAMESPACE, name)] = {**secret, "data": data}


def ca_bundle(r: Rendered) -> str:
    bundle: str = r.one("APIService", "v1.plnt.work")["spec"]["caBundle"]
    return bundle


def test_upgrade_keeps_the_ca_bundle_and_every_certificate(
    standin: KubeStandin,
    helm_config: helm_python.Config,
    chart: helm_python.Chart,
    installed: Rendered,
) -> None:
    keep(standin, installed)
    upgraded = upgrade_render(helm_config, chart, {"apiserver": {"replicas": 3}})
    for name in CHART_SECRETS:
        assert f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}" in standin.requests
        assert upgraded.one("Secret", name)["data"] == installed.one("Secret", name)["data"]
    assert ca_bundle(upgraded) == ca_bundle(installed)
    assert upgraded.one("Deployment", "plnt-apiserver")["spec"]["replicas"] == 3


def test_a_secret_missing_a_key_is_replaced_by_a_new_ca_and_certificate(
    standin: KubeStandin,
    helm_config: helm_python.Config,
    chart: helm_python.Chart,
    installed: Rendered,
) -> None:
    keep(standin, installed, drop_key="tls.key")
    upgraded = upgrade_render(helm_config, chart)
    new_secret = upgraded.one("Secret", "plnt-apiserver-tls")
    assert ca_bundle(upgraded) != ca_bundle(installed)
    assert set(new_secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca = rendering.certificate(rendering.secret_bytes(new_secret, "ca.crt"))
    rendering.certificate(rendering.secret_bytes(new_secret, "tls.crt")).verify_directly_issued_by(
        ca
    )
    assert new_secret["data"]["ca.crt"] == ca_bundle(upgraded)


def test_without_previous_secrets_an_upgrade_render_generates_them(
    standin: KubeStandin,
    helm_config: helm_python.Config,
    chart: helm_python.Chart,
    installed: Rendered,
) -> None:
    standin.secrets.clear()
    upgraded = upgrade_render(helm_config, chart)
    assert ca_bundle(upgraded) != ca_bundle(installed)
    server = upgraded.one("Secret", "plnt-etcd-server-tls")
    client = upgraded.one("Secret", "plnt-etcd-client-tls")
    assert server["data"]["ca.crt"] == client["data"]["ca.crt"]
