"""What a kubectl user sees of Invocations: resources, explain, get, the immutable spec,
and the invocation log's old name warning (a `plnt up` without sagas: nothing runs them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.manifests import apply, run_manifest
from tests.e2e.outputs import rows
from tests.support.plnt_server import Kubectl

pytestmark = pytest.mark.e2e


def invocation(name: str, namespace: str, run: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "Invocation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"workflowRun": run, "inputs": {"topic": "etcd"}, **spec},
    }


def test_api_resources_and_explain_describe_the_invocation_kind(kubectl: Kubectl) -> None:
    listed = rows(kubectl.run("api-resources", "--api-group=plnt.work").stdout)
    assert ["invocations", "inv", "plnt.work/v1", "true", "Invocation"] in listed
    explained = kubectl.run("explain", "invocation.spec").stdout
    for field in ("workflowRun", "inputs", "revision", "timeoutSeconds", "ttlSecondsAfterFinished"):
        assert field in explained
    revision = kubectl.run("explain", "invocation.spec.revision").stdout
    assert "stable" in revision and "canary" in revision


def test_get_shows_the_columns_and_the_spec_cannot_change(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("summarize", ns), invocation("once", ns, "summarize"))
    table = rows(kubectl.run("get", "inv", "-n", ns).stdout)
    assert table[0] == ["NAME", "RUN", "REVISION", "PHASE", "DURATION", "TOKENS", "AGE"]
    assert table[1][:4] == ["once", "summarize", "<none>", "Pending"]
    assert "once" in kubectl.run("get", "plnt", "-n", ns).stdout  # the category
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(invocation("once", ns, "summarize", revision=2)))
    refused = kubectl.run("apply", "-f", str(changed), check=False)
    assert refused.returncode != 0
    assert "spec.revision: Invalid value: 2: field is immutable" in refused.stderr


def test_the_invocation_logs_old_name_answers_with_kubectls_warning(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("logged", ns))
    base = f"/apis/plnt.work/v1/namespaces/{ns}/workflowruns/logged"
    new = kubectl.run("get", "--raw", f"{base}/invocationlog")
    assert json.loads(new.stdout)["kind"] == "WorkflowRunInvocationList"
    assert "Warning" not in new.stderr
    old = kubectl.run("get", "--raw", f"{base}/invocations")
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert "Warning: plnt.work/v1 WorkflowRun subresource invocations is deprecated" in old.stderr
