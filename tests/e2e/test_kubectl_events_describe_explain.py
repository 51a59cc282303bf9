"""`kubectl get events`, `kubectl events --for`, `describe` and `explain`: Events in kube's
columns, and the schema as kubectl renders it.

Each test is one thing a kubectl user does against kube-apiserver, checked for the same
outcome against a real `plnt up` (one per module; each test in its own namespace). What
still differs is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.manifests import apply, backend_manifest, run_manifest
from tests.e2e.outputs import rows
from tests.support.plnt_server import Kubectl, wait_for

pytestmark = pytest.mark.e2e


def test_events_print_kube_columns_and_kubectl_events_filters_by_object(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("ev", ns), run_manifest("other", ns))
    kubectl.run("patch", "wfr", "ev", "-n", ns, "--type=merge", "-p", '{"spec":{"replicas":2}}')
    listed = wait_for(
        lambda: (
            (out := kubectl.run("get", "events", "-n", ns).stdout).count("workflowrun/") >= 3
            and out
        ),
        message="three events",
    )
    table = rows(listed)
    assert table[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert {(r[2], r[3]) for r in table[1:]} == {
        ("Accepted", "workflowrun/ev"),
        ("Accepted", "workflowrun/other"),
        ("SpecChanged", "workflowrun/ev"),
    }
    wide = rows(kubectl.run("get", "events", "-n", ns, "-o", "wide").stdout)
    assert wide[0][-3:] == ["SEEN", "COUNT", "NAME"]
    assert all(r[-1].startswith(("ev.", "other.")) and r[-2] == "1" for r in wide[1:])
    assert {r[5] for r in wide[1:]} == {"plnt"}  # SOURCE
    names = kubectl.run("get", "events", "-n", ns, "-o", "name").stdout.split()
    assert len(names) == 3 and all(n.startswith("event/") for n in names)
    only = rows(kubectl.run("events", "-n", ns, "--for", "workflowrun/ev").stdout)
    assert sorted(r[2] for r in only[1:]) == ["Accepted", "SpecChanged"]
    assert all(r[3] == "WorkflowRun/ev" for r in only[1:])


def test_describe_plntbackend_and_explain_recursive_show_the_schema(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, backend_manifest("gpu", ns))
    described = kubectl.run("describe", "pb", "gpu", "-n", ns).stdout
    assert re.search(r"^Name:\s+gpu$", described, re.M)
    assert re.search(rf"^Namespace:\s+{ns}$", described, re.M)
    assert re.search(r"^Kind:\s+PlntBackend$", described, re.M)
    assert re.search(r"^\s+Gpu Class:\s+cpu$", described, re.M)
    assert re.search(r"^Events:\s+<none>$", described, re.M)
    explained = kubectl.run("explain", "plntbackend.spec", "--recursive").stdout
    assert "KIND:       PlntBackend" in explained
    for line in ("capacity\t<BackendCapacity>", "maxConcurrency\t<integer>", "type\t<string>"):
        assert line in explained
    assert "enum: openai, vllm, ollama, echo" in explained
