"""Invocations behind kube-apiserver's aggregator: the invoke check is the cluster's RBAC.

kube-apiserver authorizes `create invocations` before it proxies the create; plnt's
admission then asks the cluster (a SubjectAccessReview) whether the same user may also
`create workflowruns/invoke` on the run named, since the Invocation will invoke it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import Cluster, published, run_manifest
from tests.support.kube.policy import Rule


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    name = f"i-{uuid.uuid4().hex[:8]}"
    cluster.standin.add_namespace(name)
    return name


def user(cluster: Cluster, namespace: str, name: str, resources: tuple[str, ...]) -> str:
    """A token user who may create, get and list `resources` of plnt.work in `namespace`."""
    token, login = f"{name}-{uuid.uuid4().hex[:6]}", f"{name}-{namespace}"
    cluster.standin.add_user(token, login, ["devs"])
    cluster.standin.allow(
        Rule(("create", "get", "list"), user=login, api_groups=("plnt.work",),
             resources=resources, namespace=namespace)
    )  # fmt: skip
    return token


def manifest(name: str, run: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "Invocation",
            "metadata": {"name": name},
            "spec": {"workflowRun": run, "inputs": {"topic": "rbac"}, "timeoutSeconds": 5},
        }
    )


def test_creating_an_invocation_needs_invoke_on_the_run_as_the_cluster_says(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    ref, digest = published(cluster, "inv")
    both = user(cluster, namespace, "ian", ("invocations", "workflowruns", "workflowruns/invoke"))
    owner = cluster.kubectl(both, tmp_path / "ian")
    owner.run(
        "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(run_manifest("r", ref, digest))
    )
    token = user(cluster, namespace, "ivo", ("invocations", "workflowruns"))
    login = f"ivo-{namespace}"
    ivo = cluster.kubectl(token, tmp_path / "ivo")
    refused = ivo.run("create", "-n", namespace, "-f", "-", input=manifest("i1", "r"), check=False)
    assert refused.returncode != 0
    assert (
        f'invocations.plnt.work "i1" is forbidden: User "{login}" cannot create resource'
        f' "workflowruns/invoke" in API group "plnt.work" in the namespace "{namespace}"'
    ) in refused.stderr
    asked = [
        review["spec"]["resourceAttributes"]
        for review in cluster.standin.subject_access_reviews
        if review["spec"].get("user") == login
        and review["spec"].get("resourceAttributes", {}).get("subresource") == "invoke"
    ]
    assert asked and (asked[-1]["name"], asked[-1]["verb"]) == ("r", "create")

    created = owner.run("create", "-n", namespace, "-f", "-", input=manifest("i2", "r"))
    assert "invocation.plnt.work/i2 created" in created.stdout
