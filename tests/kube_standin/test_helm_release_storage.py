"""Helm's release storage in the stand-in: the `secret` and `configmap` drivers.

client-go sends Secrets and ConfigMaps as kube protobuf, so Helm's default release
storage works only because the stand-in decodes those bodies (`protobuf`) into the JSON
its JSON path stores. The Helm tests drive the real Helm library (`helm_python`) through
a whole release life with the plnt runner chart; the others send hand-encoded protobuf
(field numbers from k8s.io/api `core/v1/generated.proto` and k8s.io/apimachinery
`meta/v1/generated.proto`) to pin what each field becomes.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import uuid
from pathlib import Path
from typing import Any

import helm_python
import pytest

from plnt.sagas.targets import runners
from plnt.sagas.values import RunRef
from tests.support.kube import protobuf, standin
from tests.support.kube.clients import session

ADMIN = "admin-token-helm"
ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "workflow-runner"
SPEC = ROOT / "examples" / "chat.workflow.yaml"
PROTOBUF = {"Content-Type": protobuf.MEDIA, "Accept": f"{protobuf.MEDIA}, application/json"}
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def admin(kube: standin.KubeStandIn) -> str:
    """The token of a `system:masters` user."""
    kube.add_user(ADMIN, "helm-admin", ["system:masters"])
    return ADMIN


@pytest.fixture(scope="module")
def kubeconfig(
    kube: standin.KubeStandIn, admin: str, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return kube.write_kubeconfig(tmp_path_factory.mktemp("helm") / "kubeconfig", token=admin)


def stored(kube: standin.KubeStandIn, resource: str, *, label: str, value: str) -> list[Obj]:
    """Copies of the stored objects of `resource` in `default` whose `label` is `value`."""

    async def read() -> list[Obj]:
        return [
            copy.deepcopy(obj)
            for obj in kube.state.store.list(resource, "default")
            if (obj["metadata"].get("labels") or {}).get(label) == value
        ]

    return kube.call(read())


def revision(name: str, number: int, *, replicas: int = 1) -> runners.Revision:
    spec = SPEC.read_bytes()
    return runners.Revision(
        run=RunRef("default", name, f"uid-{name}"),
        revision=number,
        digest=f"sha256:{hashlib.sha256(spec).hexdigest()}",
        spec=spec,
        replicas=replicas,
        ref="oci-layout:/images/chat:latest",
    )


@pytest.mark.parametrize(
    ("driver", "resource", "storage_type"),
    [("secret", "secrets", "helm.sh/release.v1"), ("configmap", "configmaps", None)],
)
def test_helm_installs_upgrades_rolls_back_and_uninstalls_a_runner_with_release_storage_in_kube(
    kube: standin.KubeStandIn,
    kubeconfig: Path,
    driver: str,
    resource: str,
    storage_type: str | None,
) -> None:
    first = revision(f"helm-{driver}", 1)
    release = first.release_name()
    with helm_python.Config(
        kubeconfig_path=str(kubeconfig), namespace="default", storage_driver=driver
    ) as helm:
        helm.install(str(CHART), release, first.to_values(), namespace="default")

        listed = {r["name"]: r for r in helm.list()}
        assert listed[release]["status"] == "deployed"
        assert listed[release]["revision"] == 1
        records = stored(kube, resource, label="name", value=release)
        assert [r["metadata"]["name"] for r in records] == [f"sh.helm.release.v1.{release}.v1"]
        record = records[0]
        assert record["metadata"]["labels"]["owner"] == "helm"
        assert record["metadata"]["labels"]["status"] == "deployed"
        assert record.get("type") == storage_type
        assert record["data"]["release"]  # Helm's gzipped, base64 release record
        chart_objects = {
            (obj["kind"], obj["metadata"]["name"])
            for kind in ("deployments", "services", "configmaps")
            for obj in stored(kube, kind, label="app.kubernetes.io/instance", value=release)
        }
        assert {"Deployment", "Service", "ConfigMap"} <= {kind for kind, _ in chart_objects}

        helm.upgrade(str(CHART), release, revision(first.run.name, 1, replicas=2).to_values())
        assert helm.status(release)["revision"] == 2
        history = helm.history(release)
        assert [(h["revision"], h["status"]) for h in history] == [
            (1, "superseded"),
            (2, "deployed"),
        ]
        deployment = stored(kube, "deployments", label="app.kubernetes.io/instance", value=release)
        assert deployment[0]["spec"]["replicas"] == 2

        helm.rollback(release, version=1)
        assert helm.status(release)["revision"] == 3
        deployment = stored(kube, "deployments", label="app.kubernetes.io/instance", value=release)
        assert deployment[0]["spec"]["replicas"] == 1
        records = stored(kube, resource, label="name", value=release)
        by_version = {r["metadata"]["labels"]["version"]: r for r in records}
        assert sorted(by_version) == ["1", "2", "3"]
        assert by_version["3"]["metadata"]["labels"]["status"] == "deployed"

        helm.uninstall(release)
        assert release not in {r["name"] for r in helm.list(all_states=True)}
    assert stored(kube, resource, label="name", value=release) == []
    for kind in ("deployments", "services", "configmaps"):
        assert stored(kube, kind, label="app.kubernetes.io/instance", value=release) == []


# --- hand-encoded protobuf ------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _bytes_field(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _map_entry(number: int, key: str, value: bytes | str) -> bytes:
    return _bytes_field(number, _bytes_field(1, key) + _bytes_field(2, value))


def _kube_protobuf(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _bytes_field(1, api_version) + _bytes_field(2, kind)
    return protobuf.MAGIC + _bytes_field(1, type_meta) + _bytes_field(2, raw)


def _object_meta(name: str) -> bytes:
    owner = (
        _bytes_field(5, "apps/v1")
        + _bytes_field(1, "Deployment")
        + _bytes_field(3, "owner")
        + _bytes_field(4, "owner-uid")
        + _varint_field(6, 1)
    )
    return (
        _bytes_field(1, name)
        + _bytes_field(3, "")  # client-go writes empty strings; JSON omits them
        + _bytes_field(8, b"")  # the zero creationTimestamp
        + _varint_field(10, 30)
        + _map_entry(11, "app", "proto")
        + _map_entry(11, "tier", "test")
        + _map_entry(12, "note", "decoded")
        + _bytes_field(13, owner)
        + _bytes_field(14, "example.com/keep")
        + _bytes_field(99, "a field number kube does not know")
    )


async def test_a_protobuf_secret_is_stored_as_the_json_a_json_client_would_have_sent(
    kube: standin.KubeStandIn, admin: str
) -> None:
    name = f"proto-{uuid.uuid4().hex[:8]}"
    secret = (
        _bytes_field(1, _object_meta(name))
        + _map_entry(2, "binary", b"\x00\xffbytes")
        + _bytes_field(3, "example.com/proto")
        + _map_entry(4, "plain", "text")
        + _varint_field(5, 0)
    )
    path = "/api/v1/namespaces/default/secrets"
    async with session(kube, admin) as client:
        body = _kube_protobuf("v1", "Secret", secret)
        async with client.post(path, data=body, headers=PROTOBUF) as response:
            assert response.status == 201, await response.text()
            assert response.content_type == "application/json"
            created = await response.json()
    meta = created["metadata"]
    assert meta["name"] == name
    assert meta["namespace"] == "default"
    assert meta["labels"] == {"app": "proto", "tier": "test"}
    assert meta["annotations"] == {"note": "decoded"}
    assert meta["deletionGracePeriodSeconds"] == 30
    assert meta["finalizers"] == ["example.com/keep"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "owner",
            "uid": "owner-uid",
            "controller": True,
        }
    ]
    assert created["type"] == "example.com/proto"
    assert created["immutable"] is False
    assert created["data"] == {
        "binary": base64.b64encode(b"\x00\xffbytes").decode(),
        "plain": base64.b64encode(b"text").decode(),
    }
    assert "stringData" not in created


async def test_a_protobuf_configmap_is_created_and_then_updated_with_binary_data(
    kube: standin.KubeStandIn, admin: str
) -> None:
    name = f"proto-{uuid.uuid4().hex[:8]}"
    path = "/api/v1/namespaces/default/configmaps"
    first = _bytes_field(1, _bytes_field(1, name)) + _map_entry(2, "key", "one")
    second = (
        _bytes_field(1, _bytes_field(1, name))
        + _map_entry(2, "key", "two")
        + _map_entry(3, "blob", b"\x01\x02")
    )
    async with session(kube, admin) as client:
        body = _kube_protobuf("v1", "ConfigMap", first)
        async with client.post(path, data=body, headers=PROTOBUF) as response:
            assert response.status == 201, await response.text()
            assert (await response.json())["data"] == {"key": "one"}
        body = _kube_protobuf("v1", "ConfigMap", second)
        async with client.put(f"{path}/{name}", data=body, headers=PROTOBUF) as response:
            assert response.status == 200, await response.text()
            updated = await response.json()
    assert updated["data"] == {"key": "two"}
    assert updated["binaryData"] == {"blob": base64.b64encode(b"\x01\x02").decode()}
    assert int(updated["metadata"]["resourceVersion"]) > 0


async def test_protobuf_is_refused_with_415_for_kinds_not_decoded_and_400_when_malformed(
    kube: standin.KubeStandIn, admin: str
) -> None:
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    secrets = "/api/v1/namespaces/default/secrets"
    async with session(kube, admin) as client:
        body = _kube_protobuf("apps/v1", "Deployment", _bytes_field(1, _bytes_field(1, "d")))
        async with client.post(deployments, data=body, headers=PROTOBUF) as response:
            assert response.status == 415
            assert (await response.json())["reason"] == "UnsupportedMediaType"
        truncated = protobuf.MAGIC + b"\x0a\x7f"
        async with client.post(secrets, data=truncated, headers=PROTOBUF) as response:
            assert response.status == 400
            assert "protobuf" in (await response.json())["message"]
        cbor = {"Content-Type": "application/cbor"}
        async with client.post(secrets, data=b"\xa0", headers=cbor) as response:
            assert response.status == 415
