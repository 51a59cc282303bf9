"""Namespaces with the real kubectl against `plnt up`: get, create, watch, delete with
Terminating refusals in kube's words, `kubectl auth can-i --list` and `kubectl cluster-info`.

(The deletion of a namespace whose run has a teardown saga is in
tests/deploy/test_lifecycle.py, where a worker runs.)
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path

import yaml

from plnt.apiserver import pki as pki_module
from tests.e2e.manifests import run_manifest
from tests.e2e.outputs import read_lines, rows
from tests.support import tls
from tests.support.plnt_server import Kubectl, PlntServer, wait_for

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fresh() -> str:
    return f"n-{uuid.uuid4().hex[:10]}"


def namespace_watches(kubectl: Kubectl) -> float:
    """The server's gauge of open Namespace watches, read from /metrics."""
    metrics = kubectl.run("get", "--raw", "/metrics").stdout
    found = re.search(
        r'^plnt_apiserver_open_watches\{resource="namespaces"\} (\S+)$', metrics, re.M
    )
    return float(found.group(1)) if found else 0.0


def test_get_and_create_namespaces_print_as_kube_prints_them(kubectl: Kubectl) -> None:
    listed = rows(kubectl.run("get", "namespaces").stdout)
    assert listed[0] == ["NAME", "STATUS", "AGE"]
    by_name = {row[0]: row for row in listed[1:]}
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert by_name[name][1] == "Active"
    name = fresh()
    assert kubectl.run("create", "namespace", name).stdout.strip() == f"namespace/{name} created"
    got = kubectl.json("get", "ns", name)
    assert got["status"]["phase"] == "Active"
    assert got["spec"]["finalizers"] == ["kubernetes"]
    assert got["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
    explained = kubectl.run("explain", "namespace.spec").stdout
    assert "finalizers" in explained and "KIND:       Namespace" in explained
    refused = kubectl.run("delete", "namespace", "default", check=False)
    assert refused.returncode == 1
    assert (
        'Error from server (Forbidden): namespaces "default" is forbidden: '
        "this namespace may not be deleted" in refused.stderr
    )


def test_a_terminating_namespace_refuses_new_content_until_its_last_object_is_released(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    name = fresh()
    kubectl.run("create", "namespace", name)
    held = run_manifest("held", name)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    kubectl.run("create", "-f", "-", input=json.dumps(held))
    missing = kubectl.run(
        "create", "-f", "-", input=json.dumps(run_manifest("x", "nowhere")), check=False
    )
    assert missing.returncode == 1
    assert (
        'Error from server (NotFound): error when creating "STDIN": namespaces "nowhere" not found'
        in (missing.stderr)
    )

    deleted = kubectl.run("delete", "namespace", name, "--wait=false")
    assert deleted.stdout.strip() == f'namespace "{name}" deleted'
    assert rows(kubectl.run("get", "ns", name).stdout)[1][1] == "Terminating"
    late = kubectl.run(
        "create", "-f", "-", input=json.dumps(run_manifest("late", name)), check=False
    )
    assert late.returncode == 1
    assert (
        'Error from server (Forbidden): error when creating "STDIN": workflowruns.plnt.work '
        f'"late" is forbidden: unable to create new content in namespace {name} because it '
        "is being terminated" in late.stderr
    )

    def waits_for_the_hold() -> bool:
        ns = kubectl.json("get", "ns", name)
        return any(
            c["type"] == "NamespaceFinalizersRemaining" and c["status"] == "True"
            for c in ns["status"].get("conditions", [])
        )

    wait_for(waits_for_the_hold, message="the namespace to report the held run")
    kubectl.run(
        "patch", "wfr", "held", "-n", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    kubectl.run("wait", "--for=delete", f"namespace/{name}", "--timeout=30s")
    gone = kubectl.run("get", "ns", name, check=False)
    assert gone.returncode == 1 and f'namespaces "{name}" not found' in gone.stderr


def test_a_watch_of_namespaces_prints_creation_termination_and_removal(
    kubectl: Kubectl,
) -> None:
    name = fresh()
    before = namespace_watches(kubectl)
    with kubectl.background("get", "ns", "--watch-only", "--output-watch-events") as watch:
        wait_for(lambda: namespace_watches(kubectl) > before, message="the watch to open")
        kubectl.run("create", "namespace", name)
        kubectl.run("delete", "namespace", name, "--timeout=30s")
        lines = [line.split() for line in read_lines(watch, 2)]
        while lines[-1][0] != "DELETED":  # kubectl delete returned: the namespace is gone
            lines.append(read_lines(watch, 1)[0].split())
    assert lines[0][:3] == ["EVENT", "NAME", "STATUS"]
    assert lines[1][:3] == ["ADDED", name, "Active"]
    assert lines[2][:3] == ["MODIFIED", name, "Terminating"]
    assert lines[-1][:2] == ["DELETED", name]
    assert all(line[1] == name for line in lines[1:])


def test_auth_can_i_list_shows_the_policys_rules_for_an_admin_and_a_viewer(
    server: PlntServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    admin = rows(kubectl.run("auth", "can-i", "--list").stdout)
    assert admin[0] == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert ["*.*", "[]", "[]", "[*]"] in admin
    assert ["[*]", "[]", "[*]"] in admin  # the non-resource URL * for every verb

    paths = pki_module.Pki.at(server.pki_dir)
    cert = tls.write_client_cert(
        tls.client_ca(paths), tmp_path / "vic", common_name="vic", organizations=["plnt:viewers"]
    )
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(cert.cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(cert.key.read_bytes()).decode(),
    }
    viewer_config = tmp_path / "viewer.kubeconfig"
    viewer_config.write_text(yaml.safe_dump(config))
    viewer = Kubectl(kubeconfig=viewer_config, cache_dir=kubectl.cache_dir)
    listed = rows(viewer.run("auth", "can-i", "--list").stdout)
    # The default policy grants viewers reads in every API group ("*").
    assert ["workflowruns.*", "[]", "[]", "[get", "list", "watch]"] in listed
    assert ["selfsubjectrulesreviews.authorization.k8s.io", "[]", "[]", "[create]"] in listed
    assert not any(row[0] == "*.*" for row in listed)


def test_cluster_info_names_the_control_plane(server: PlntServer, kubectl: Kubectl) -> None:
    result = kubectl.run("cluster-info")
    first = ANSI.sub("", result.stdout).splitlines()[0]
    assert first == f"Kubernetes control plane is running at {server.url}"
