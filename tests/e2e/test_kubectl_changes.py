"""Changing objects as kubectl users do: `label`/`annotate` with overwrite and
resourceVersion preconditions, JSON patch, `replace --force`, `edit`, `diff` and
`apply --prune`.

Each test is one thing a kubectl user does against kube-apiserver, checked for the same
outcome against a real `plnt up` (one per module; each test in its own namespace). What
still differs is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.manifests import apply, run_manifest
from tests.support.plnt_server import Kubectl

pytestmark = pytest.mark.e2e


def test_label_overwrite_resource_version_precondition_and_annotation_removal(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("lb", ns, tier="gold"))
    refused = kubectl.run("label", "wfr", "lb", "-n", ns, "tier=silver", check=False)
    assert refused.returncode == 1 and "--overwrite is false" in refused.stderr
    kubectl.run("label", "wfr", "lb", "-n", ns, "tier=silver", "--overwrite")
    stale = kubectl.run(
        "label",
        "wfr",
        "lb",
        "-n",
        ns,
        "tier=bronze",
        "--overwrite",
        "--resource-version=1",
        check=False,
    )
    assert stale.returncode == 1
    assert (
        'Error from server (Conflict): Operation cannot be fulfilled on workflowruns.plnt.work "lb"'
        in stale.stderr
    )
    current = kubectl.json("get", "wfr", "lb", "-n", ns)["metadata"]["resourceVersion"]
    kubectl.run(
        "label",
        "wfr",
        "lb",
        "-n",
        ns,
        "tier=bronze",
        "--overwrite",
        f"--resource-version={current}",
    )
    kubectl.run("annotate", "wfr", "lb", "-n", ns, "note=hi", "keep=yes")
    kubectl.run("annotate", "wfr", "lb", "-n", ns, "note-")
    meta = kubectl.json("get", "wfr", "lb", "-n", ns)["metadata"]
    assert meta["labels"]["tier"] == "bronze"
    assert "note" not in meta["annotations"] and meta["annotations"]["keep"] == "yes"


def test_json_patch_with_a_failing_test_operation_is_invalid_and_changes_nothing(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("jp", ns))
    before = kubectl.json("get", "wfr", "jp", "-n", ns)
    patch = [
        {"op": "test", "path": "/spec/replicas", "value": 7},
        {"op": "replace", "path": "/spec/replicas", "value": 2},
    ]
    failed = kubectl.run(
        "patch", "wfr", "jp", "-n", ns, "--type=json", "-p", json.dumps(patch), check=False
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith('The WorkflowRun "jp" is invalid: patch: ')
    assert "test failed: the value at '/spec/replicas' is not 7" in failed.stderr
    after = kubectl.json("get", "wfr", "jp", "-n", ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    patch[0]["value"] = 1
    kubectl.run("patch", "wfr", "jp", "-n", ns, "--type=json", "-p", json.dumps(patch))
    assert kubectl.json("get", "wfr", "jp", "-n", ns)["spec"]["replicas"] == 2


def test_replace_force_deletes_and_recreates_with_a_new_uid(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("rf", ns))
    live = kubectl.json("get", "wfr", "rf", "-n", ns)
    live["spec"]["replicas"] = 6
    path = tmp_path / "rf.yaml"
    path.write_text(yaml.safe_dump(live))
    out = kubectl.run("replace", "--force", "-f", str(path)).stdout
    assert f'workflowrun.plnt.work "rf" deleted from {ns} namespace' in out
    assert "workflowrun.plnt.work/rf replaced" in out
    again = kubectl.json("get", "wfr", "rf", "-n", ns)
    assert again["metadata"]["uid"] != live["metadata"]["uid"]
    assert again["metadata"]["generation"] == 1 and again["spec"]["replicas"] == 6


def test_edit_reopens_the_editor_with_the_servers_reason_after_an_invalid_change(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("ed", ns, replicas=2))
    seen = tmp_path / "seen"
    seen.mkdir()
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import pathlib, sys\n"
        f"seen = pathlib.Path({str(seen)!r})\n"
        "attempt = len(list(seen.iterdir()))\n"
        "path = pathlib.Path(sys.argv[1])\n"
        "text = path.read_text()\n"
        "(seen / str(attempt)).write_text(text)\n"
        "if attempt == 0:\n"
        "    text = text.replace('replicas: 2', 'replicas: -3')\n"
        "else:\n"
        "    text = text.replace('replicas: -3', 'replicas: 8')\n"
        "path.write_text(text)\n"
    )
    kubectl.env["KUBE_EDITOR"] = f"{sys.executable} {editor}"
    result = kubectl.run("edit", "wfr", "ed", "-n", ns)
    assert "workflowrun.plnt.work/ed edited" in result.stdout
    assert 'error: workflowruns.plnt.work "ed" is invalid' in result.stderr
    reopened = (seen / "1").read_text()
    assert '# workflowruns.plnt.work "ed" was not valid:' in reopened
    assert "# * spec.replicas: Invalid value: -3: must be greater than or equal to 0" in reopened
    assert sorted(p.name for p in seen.iterdir()) == ["0", "1"]
    assert kubectl.json("get", "wfr", "ed", "-n", ns)["spec"]["replicas"] == 8


def test_diff_shows_the_server_side_result_and_changes_nothing(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("df", ns))
    before = kubectl.json("get", "wfr", "df", "-n", ns)
    path = tmp_path / "df.yaml"
    path.write_text(yaml.safe_dump(run_manifest("df", ns, replicas=9)))
    diff = kubectl.run("diff", "-f", str(path), check=False)
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "-  replicas: 1" in diff.stdout and "+  replicas: 9" in diff.stdout
    assert "-  generation: 1" in diff.stdout and "+  generation: 2" in diff.stdout
    after = kubectl.json("get", "wfr", "df", "-n", ns)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    same = tmp_path / "same.yaml"
    same.write_text(yaml.safe_dump(run_manifest("df", ns)))
    assert kubectl.run("diff", "-f", str(same)).stdout == ""


def test_apply_prune_with_an_allowlist_removes_what_left_the_manifest(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("p1", ns, set="s"), run_manifest("p2", ns, set="s"))
    path = tmp_path / "only-p1.yaml"
    path.write_text(yaml.safe_dump(run_manifest("p1", ns, set="s")))
    out = kubectl.run(
        "apply",
        "-f",
        str(path),
        "--prune",
        "-l",
        "set=s",
        "--prune-allowlist=plnt.work/v1/WorkflowRun",
    ).stdout
    assert "workflowrun.plnt.work/p2 pruned" in out
    assert kubectl.run("get", "wfr", "-n", ns, "-o", "name").stdout.split() == [
        "workflowrun.plnt.work/p1"
    ]
