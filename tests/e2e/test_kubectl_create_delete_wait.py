"""`kubectl create` with generateName, `delete` by label and `--all`, and `kubectl wait`
for a deletion or a jsonpath value.

Each test is one thing a kubectl user does against kube-apiserver, checked for the same
outcome against a real `plnt up` (one per module; each test in its own namespace). What
still differs is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.e2e.manifests import apply, run_manifest
from tests.e2e.outputs import open_watches
from tests.support.plnt_server import Kubectl, wait_for

pytestmark = pytest.mark.e2e


def test_create_with_generate_name_then_delete_by_label_and_all(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    obj = run_manifest("unused", ns)
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "gen-"
    path = tmp_path / "gen.yaml"
    path.write_text(yaml.safe_dump(obj))
    made = [kubectl.run("create", "-f", str(path)).stdout.strip() for _ in range(2)]
    assert all(re.fullmatch(r"workflowrun\.plnt\.work/gen-[a-z0-9]{5} created", m) for m in made)
    assert made[0] != made[1]
    apply(kubectl, tmp_path, run_manifest("keep", ns, tier="keep"))
    deleted = kubectl.run("delete", "wfr", "-l", "app=unused", "-n", ns).stdout
    assert deleted.count("deleted") == 2
    assert kubectl.run("get", "wfr", "-n", ns, "-o", "name").stdout.split() == [
        "workflowrun.plnt.work/keep"
    ]
    everything = kubectl.run("delete", "wfr", "--all", "-n", ns).stdout
    assert f'workflowrun.plnt.work "keep" deleted from {ns} namespace' in everything
    empty = kubectl.run("get", "wfr", "-n", ns)
    assert empty.stdout == "" and f"No resources found in {ns} namespace." in empty.stderr


def test_wait_for_delete_and_for_a_jsonpath_value_return_when_the_change_happens(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("wt", ns))
    with kubectl.background(
        "wait", "wfr/wt", "-n", ns, "--for=jsonpath={.spec.replicas}=4", "--timeout=60s"
    ) as waiter:
        kubectl.run("scale", "wfr", "wt", "-n", ns, "--replicas=4")
        out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert out.strip() == "workflowrun.plnt.work/wt condition met"
    watching = open_watches(kubectl)
    with kubectl.background("wait", "wfr/wt", "-n", ns, "--for=delete", "--timeout=60s") as waiter:
        # Delete only once the waiter watches; before, it would find nothing to wait for.
        wait_for(lambda: open_watches(kubectl) > watching, message="the waiter's watch")
        kubectl.run("delete", "wfr", "wt", "-n", ns, "--wait=false")
        out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert out.strip() == "workflowrun.plnt.work/wt condition met"
    # Waiting for the deletion of something already gone succeeds at once, silently.
    gone = kubectl.run("wait", "wfr/wt", "-n", ns, "--for=delete", "--timeout=5s")
    assert gone.stdout == "" and gone.stderr == ""
