"""The real kubectl against the stand-in, and the real plnt (`plnt up`) behind its aggregator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kube import policy, standin
from tests.support.plnt_server import Kubectl, PlntServer

REPO = Path(__file__).resolve().parents[2]
PLNT_POLICY = """\
rules:
- groups: [plnt-admins]
  verbs: ["*"]
  resources: ["*"]
- groups: [plnt-viewers]
  verbs: [get, list, watch]
  resources: ["*"]
- groups: [system:authenticated]
  verbs: [get]
  nonResourcePaths: [/api, /api/*, /apis, /apis/*, /openapi, /openapi/*, /version]
"""


def kubectl_for(kube: standin.KubeStandIn, tmp_path: Path, token: str) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(
        kubeconfig=kube.write_kubeconfig(tmp_path / "kubeconfig", token=token), cache_dir=cache
    )


@pytest.fixture(scope="module")
def plnt(
    kube: standin.KubeStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PlntServer]:
    state = tmp_path_factory.mktemp("plnt-state")
    policy_file = state.parent / f"{state.name}-policy.yaml"
    policy_file.write_text(PLNT_POLICY)
    with PlntServer(state, extra_args=("--policy-file", str(policy_file))) as server:
        pki = server.pki_dir
        kube.use_proxy_client_certificate(
            pki / "front-proxy-client.crt", pki / "front-proxy-client.key"
        )
        service = kube.register_apiservice(
            server.url, (pki / "ca.crt").read_bytes(), server_name="localhost"
        )
        assert service.available, service.unavailable_reason
        try:
            yield server
        finally:
            kube.unregister_apiservice()


def test_kubectl_gets_events_and_asks_can_i_through_the_stand_in(
    kube: standin.KubeStandIn, token: str, tmp_path: Path
) -> None:
    kube.add_user(token, "frank")
    kube.allow(
        policy.Rule(
            verbs=("get", "list"),
            user="frank",
            api_groups=("",),
            resources=("events",),
            namespace="default",
            name="event-viewer",
        )
    )
    kubectl = kubectl_for(kube, tmp_path, token)
    assert "No resources found in default namespace." in kubectl.run("get", "events").stderr
    assert kubectl.run("auth", "can-i", "list", "events").stdout.strip() == "yes"
    denied = kubectl.run("auth", "can-i", "delete", "events", check=False)
    assert denied.returncode == 1 and denied.stdout.strip() == "no"
    forbidden = kubectl.run("get", "configmaps", check=False)
    assert (
        'User "frank" cannot list resource "configmaps" in API group "" in the namespace "default"'
        in forbidden.stderr
    )


def test_kubectl_reaches_plnt_through_the_aggregator_as_the_token_user(
    kube: standin.KubeStandIn, plnt: PlntServer, token: str, tmp_path: Path
) -> None:
    kube.add_user(token, "grace", ["plnt-admins"])
    kube.allow(
        policy.Rule(
            verbs=("*",),
            group="plnt-admins",
            api_groups=("plnt.work",),
            resources=("*",),
            name="plnt-admin",
        )
    )
    kubectl = kubectl_for(kube, tmp_path, token)
    resources = kubectl.run("api-resources", "--api-group=plnt.work").stdout
    assert "workflowruns" in resources and "plntbackends" in resources
    assert kubectl.run("get", "workflowruns", "-A").returncode == 0
    kubectl.run("apply", "-f", str(REPO / "examples" / "plntbackend.yaml"))
    backend = kubectl.json("get", "plntbackend", "echo", "--show-managed-fields")
    assert backend["spec"]["type"] == "echo"
    assert any(
        entry["manager"].startswith("kubectl") for entry in backend["metadata"]["managedFields"]
    )


def test_plnt_sees_the_token_users_identity_and_denies_what_its_own_policy_does_not_grant(
    kube: standin.KubeStandIn, plnt: PlntServer, token: str, tmp_path: Path
) -> None:
    kube.add_user(token, "heidi", ["plnt-viewers"])
    kube.allow(
        policy.Rule(
            verbs=("*",), user="heidi", api_groups=("plnt.work",), resources=("*",), name="heidi"
        )
    )
    kubectl = kubectl_for(kube, tmp_path, token)
    assert kubectl.run("get", "plntbackends").returncode == 0
    denied = kubectl.run("delete", "plntbackend", "nothing-here", check=False)
    assert denied.returncode != 0
    assert (
        'User "heidi" cannot delete resource "plntbackends" in API group "plnt.work"'
        in denied.stderr
    )
