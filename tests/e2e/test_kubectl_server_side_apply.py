"""The real kubectl's `apply --server-side` against a real standalone plnt (`plnt up`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.plnt_server import Kubectl

pytestmark = pytest.mark.e2e

DIGEST = "sha256:" + "ab" * 32


def manifest(name: str, namespace: str, **spec: object) -> dict[str, object]:
    body: dict[str, object] = {
        "workflow": {"ref": "oci://127.0.0.1:5000/wf/summarize:1", "digest": DIGEST},
        "replicas": 1,
    }
    body.update(spec)
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": body,
    }


def write(tmp_path: Path, obj: object) -> str:
    path = tmp_path / "wfr.yaml"
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def get(kubectl: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    out = kubectl.run(
        "get", "wfr", name, "-n", namespace, "-o", "json", "--show-managed-fields"
    ).stdout
    return dict(json.loads(out))


def test_server_side_apply_creates_then_reapplies_a_changed_file(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    out = kubectl.run(
        "apply", "--server-side", "-f", write(tmp_path, manifest("ssa", namespace, gpuClass="l4"))
    ).stdout
    assert "workflowrun.plnt.work/ssa serverside-applied" in out
    first = get(kubectl, "ssa", namespace)
    assert first["metadata"]["generation"] == 1
    assert managers(first)[("kubectl", "Apply")]["fieldsV1"]["f:spec"]["f:gpuClass"] == {}
    changed = manifest("ssa", namespace, replicas=3)
    kubectl.run("apply", "--server-side", "-f", write(tmp_path, changed))
    second = get(kubectl, "ssa", namespace)
    assert second["spec"]["replicas"] == 3
    assert "gpuClass" not in second["spec"]
    assert second["metadata"]["generation"] == 2


def test_a_field_changed_by_kubectl_patch_conflicts_until_forced(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    path = write(tmp_path, manifest("cf", namespace, replicas=2))
    kubectl.run("apply", "--server-side", "-f", path)
    kubectl.run(
        "patch", "wfr", "cf", "-n", namespace, "--type", "merge", "-p", '{"spec":{"replicas":5}}'
    )
    refused = kubectl.run("apply", "--server-side", "-f", path, check=False)
    assert refused.returncode != 0
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using plnt.work/v1: '
        ".spec.replicas" in refused.stderr
    )
    assert get(kubectl, "cf", namespace)["spec"]["replicas"] == 5
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", path)
    forced = get(kubectl, "cf", namespace)
    assert forced["spec"]["replicas"] == 2
    assert ("kubectl-patch", "Update") not in managers(forced)


def test_get_shows_managed_fields_only_when_asked(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "--server-side", "-f", write(tmp_path, manifest("mf", namespace)))
    shown = kubectl.run(
        "get", "wfr", "mf", "-n", namespace, "-o", "yaml", "--show-managed-fields"
    ).stdout
    meta = yaml.safe_load(shown)["metadata"]
    (entry,) = meta["managedFields"]
    assert entry["manager"] == "kubectl" and entry["operation"] == "Apply"
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {"f:app": {}}}
    hidden = kubectl.run("get", "wfr", "mf", "-n", namespace, "-o", "yaml").stdout
    assert "managedFields" not in hidden


def test_server_side_apply_takes_over_from_client_side_apply(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", write(tmp_path, manifest("mig", namespace)))
    csa = get(kubectl, "mig", namespace)
    assert ("kubectl-client-side-apply", "Update") in managers(csa)
    kubectl.run(
        "apply", "--server-side", "-f", write(tmp_path, manifest("mig", namespace, replicas=4))
    )
    ssa = get(kubectl, "mig", namespace)
    assert ssa["spec"]["replicas"] == 4
    assert ("kubectl", "Apply") in managers(ssa)
    annotation = ssa["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert json.loads(annotation)["spec"]["replicas"] == 4


def test_server_side_dry_run_changes_nothing(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    out = kubectl.run(
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        write(tmp_path, manifest("dry", namespace)),
    ).stdout
    assert "serverside-applied (server dry run)" in out
    missing = kubectl.run("get", "wfr", "dry", "-n", namespace, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
