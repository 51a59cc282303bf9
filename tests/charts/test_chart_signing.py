"""The chart's signature policy: each trusted signer's PEM mounted into the API server and
the worker from its ConfigMap or Secret, and the same policy flags on both."""

from __future__ import annotations

from collections.abc import Callable

import helm_python

from tests.charts import rendering
from tests.charts.rendering import Rendered

Render = Callable[[str], Rendered]


def _policy_args(args: list[str]) -> list[str]:
    return [
        a
        for a in args
        if a.startswith(("--trusted-signer", "--signer-identity", "--require-signatures"))
    ]


def test_the_server_and_worker_get_the_same_signers_mounted_and_the_same_policy(
    chart: helm_python.Chart, rendered: Render
) -> None:
    values = rendering.VALUES_SETS["signing"]
    assert values is not None
    signing = values["signing"]
    more = {"name": "release", "configMap": "release-key", "key": "release.pub"}
    r = rendering.render(chart, {"signing": {**signing, "signers": [more, *signing["signers"]]}})
    expected = [
        "--trusted-signer=release=/etc/plnt/signers/release/release.pub",
        "--trusted-signer=ci=/etc/plnt/signers/ci/ca.pem",
        "--signer-identity=ci=ci@example.com",
        "--require-signatures=prod",
    ]
    for workload, name in (("plnt-apiserver", "apiserver"), ("plnt-worker", "worker")):
        deployment = r.one("Deployment", workload)
        args = rendering.container(deployment, name)["args"]
        assert _policy_args(args) == expected, workload
        _, release = rendering.mount_of(deployment, name, "/etc/plnt/signers/release/release.pub")
        assert release["configMap"] == {"name": "release-key"}
        _, ci = rendering.mount_of(deployment, name, "/etc/plnt/signers/ci/ca.pem")
        assert ci["secret"] == {"secretName": "ci-ca"}


def test_by_default_no_signer_is_trusted_and_no_signature_is_required(rendered: Render) -> None:
    r = rendered("default")
    for workload, name in (("plnt-apiserver", "apiserver"), ("plnt-worker", "worker")):
        args = rendering.container(r.one("Deployment", workload), name)["args"]
        assert _policy_args(args) == [], workload
