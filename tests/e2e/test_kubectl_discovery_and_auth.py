"""Discovery, OpenAPI, version and raw calls (`get --raw`, `create --raw`, `api-versions`,
`cluster-info`), and `kubectl auth can-i` / `whoami` answered from the server's policy.

Each test is one thing a kubectl user does against kube-apiserver, checked for the same
outcome against a real `plnt up` (one per module; each test in its own namespace). What
still differs is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

from plnt.apiserver import pki as pki_module
from tests.e2e.manifests import run_manifest
from tests.e2e.outputs import rows
from tests.support import tls
from tests.support.plnt_server import Kubectl, PlntServer

pytestmark = pytest.mark.e2e


def test_raw_discovery_openapi_version_and_api_versions(kubectl: Kubectl) -> None:
    resources = json.loads(kubectl.run("get", "--raw", "/apis/plnt.work/v1").stdout)
    assert resources["kind"] == "APIResourceList" and resources["groupVersion"] == "plnt.work/v1"
    root = json.loads(kubectl.run("get", "--raw", "/openapi/v3").stdout)
    url = root["paths"]["apis/plnt.work/v1"]["serverRelativeURL"]
    doc = json.loads(kubectl.run("get", "--raw", url).stdout)
    assert doc["openapi"].startswith("3.")
    version = kubectl.run("version", "-o", "json")
    server = json.loads(version.stdout)["serverVersion"]
    assert re.fullmatch(r"v1\.\d+\.\d+(-[0-9A-Za-z.]+)?", server["gitVersion"])
    assert "WARNING" not in version.stderr  # no client/server skew warning
    assert kubectl.run("api-versions").stdout.split() == ["plnt.work/v1", "v1"]
    health = kubectl.run("get", "--raw", "/readyz?verbose&exclude=etcd").stdout
    assert "[+]etcd excluded: ok" in health and health.rstrip().endswith("readyz check passed")
    missing = kubectl.run("get", "--raw", "/no/such/path", check=False)
    assert missing.returncode == 1
    assert "Error from server (NotFound)" in missing.stderr


def test_auth_can_i_and_whoami_answer_from_the_servers_own_policy(
    server: PlntServer, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    assert kubectl.run("auth", "can-i", "delete", "wfr", "-n", ns).stdout.strip() == "yes"
    whoami = rows(kubectl.run("auth", "whoami").stdout)
    assert ["Username", "plnt-admin"] in whoami
    paths = pki_module.Pki.at(server.pki_dir)
    cert = tls.write_client_cert(
        tls.client_ca(paths), tmp_path / "vera", common_name="vera", organizations=["plnt:viewers"]
    )
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert.cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(cert.key.read_bytes()).decode(),
    }
    viewer_config = tmp_path / "viewer.kubeconfig"
    viewer_config.write_text(yaml.safe_dump(config))
    viewer = Kubectl(kubeconfig=viewer_config, cache_dir=kubectl.cache_dir)
    assert viewer.run("auth", "can-i", "get", "wfr", "-n", ns).stdout.strip() == "yes"
    refused = viewer.run("auth", "can-i", "delete", "wfr", "-n", ns, check=False)
    assert refused.returncode == 1 and refused.stdout.strip() == "no"
    assert ["Username", "vera"] in rows(viewer.run("auth", "whoami").stdout)


def test_raw_create_takes_json_without_a_content_type_and_refuses_yaml_with_a_status(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(run_manifest("raw", ns)))
    created = kubectl.run(
        "create", "--raw", f"/apis/plnt.work/v1/namespaces/{ns}/workflowruns", "-f", str(path)
    )
    assert json.loads(created.stdout)["metadata"]["name"] == "raw"
    path = tmp_path / "raw.yaml"
    path.write_text(yaml.safe_dump(run_manifest("raw-yaml", ns)))
    refused = kubectl.run(
        "create",
        "--raw",
        f"/apis/plnt.work/v1/namespaces/{ns}/workflowruns",
        "-f",
        str(path),
        check=False,
    )
    assert refused.returncode == 1
    assert "Error from server (BadRequest)" in refused.stderr
    listed = kubectl.run("get", "wfr", "-n", ns, "-o", "name", "--request-timeout=10s").stdout
    assert listed.split() == ["workflowrun.plnt.work/raw"]
