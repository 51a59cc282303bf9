"""The real kubectl drives a real standalone plnt (`plnt up`: real etcd, HTTPS, client certs).

One server per module keeps the suite fast; every test works in its own
namespace so tests never see each other's objects.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.plnt_server import Kubectl, PlntServer, wait_for

pytestmark = pytest.mark.e2e

DIGEST = "sha256:" + "ab" * 32


def manifest(name: str, namespace: str, **spec: object) -> dict[str, object]:
    body: dict[str, object] = {
        "workflow": {"ref": "oci://127.0.0.1:5000/wf/summarize:1", "digest": DIGEST},
        "backend": {"name": "echo"},
        "replicas": 1,
    }
    body.update(spec)
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": body,
    }


def write(tmp_path: Path, obj: object, name: str = "wfr.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return path


def test_apply_creates_then_reapply_of_a_changed_file_bumps_generation(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    path = write(tmp_path, manifest("sum", namespace))
    out = kubectl.run("apply", "-f", str(path)).stdout
    assert "workflowrun.plnt.work/sum created" in out
    first = kubectl.json("get", "wfr", "sum", "-n", namespace)
    assert first["metadata"]["generation"] == 1
    path = write(tmp_path, manifest("sum", namespace, replicas=3))
    out = kubectl.run("apply", "-f", str(path)).stdout
    assert "workflowrun.plnt.work/sum configured" in out
    second = kubectl.json("get", "wfr", "sum", "-n", namespace)
    assert second["metadata"]["generation"] == 2
    assert second["spec"]["replicas"] == 3
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    out = kubectl.run("apply", "-f", str(path)).stdout
    assert "workflowrun.plnt.work/sum unchanged" in out


def test_get_prints_table_columns_and_wide_and_structured_outputs(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("tbl", namespace))))
    table = kubectl.run("get", "wfr", "-n", namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "WORKFLOW",
        "BACKEND",
        "REPLICAS",
        "PHASE",
        "REVISION",
        "AGE",
    ]
    assert table[1].split()[:4] == ["tbl", "oci://127.0.0.1:5000/wf/summarize:1", "echo", "0/1"]
    wide = kubectl.run("get", "wfr", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-4:] == ["DIGEST", "TARGET", "READY", "SLO"]
    assert "local" in wide[1]
    as_yaml = yaml.safe_load(kubectl.run("get", "wfr", "tbl", "-n", namespace, "-o", "yaml").stdout)
    assert as_yaml["kind"] == "WorkflowRun"
    assert as_yaml["spec"]["workflow"]["digest"] == DIGEST
    assert (
        kubectl.run("get", "wfr", "-n", namespace, "-o", "name").stdout.strip()
        == "workflowrun.plnt.work/tbl"
    )
    uid = kubectl.run("get", "wfr", "tbl", "-n", namespace, "-o", "jsonpath={.metadata.uid}").stdout
    assert len(uid) == 36
    shown = kubectl.run("get", "wfr", "-n", namespace, "--show-labels").stdout
    assert "app=tbl" in shown


def test_get_watch_sees_a_later_change(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("watched", namespace))))
    with kubectl.background("get", "wfr", "-n", namespace, "-w", "-o", "name") as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == "workflowrun.plnt.work/watched"
        kubectl.run("label", "wfr", "watched", "-n", namespace, "tier=gold")
        second = proc.stdout.readline()
        assert second.strip() == "workflowrun.plnt.work/watched"
    got = kubectl.json("get", "wfr", "watched", "-n", namespace)
    assert got["metadata"]["labels"]["tier"] == "gold"


def test_patch_of_each_type_label_and_annotate(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("p", namespace))))
    kubectl.run("patch", "wfr", "p", "-n", namespace, "-p", '{"spec":{"replicas":2}}')
    kubectl.run(
        "patch", "wfr", "p", "-n", namespace, "--type", "merge", "-p", '{"spec":{"gpuClass":"l4"}}'
    )
    kubectl.run(
        "patch",
        "wfr",
        "p",
        "-n",
        namespace,
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    kubectl.run("label", "wfr", "p", "-n", namespace, "team=ml")
    kubectl.run("annotate", "wfr", "p", "-n", namespace, "note=hello")
    got = kubectl.json("get", "wfr", "p", "-n", namespace)
    assert got["spec"]["replicas"] == 4
    assert got["spec"]["gpuClass"] == "l4"
    assert got["metadata"]["labels"]["team"] == "ml"
    assert got["metadata"]["annotations"]["note"] == "hello"
    assert got["metadata"]["generation"] == 4
    refused = kubectl.run(
        "patch",
        "wfr",
        "p",
        "-n",
        namespace,
        "-p",
        '{"spec":{"$retainKeys":["replicas"]}}',
        check=False,
    )
    assert refused.returncode != 0
    assert "$retainKeys" in refused.stderr


def test_edit_with_a_scripted_editor_changes_the_object(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("ed", namespace))))
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\n"
        "p = sys.argv[1]\n"
        "text = open(p).read().replace('replicas: 1', 'replicas: 5')\n"
        "open(p, 'w').write(text)\n"
    )
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    kubectl.env["KUBE_EDITOR"] = f"{sys.executable} {editor}"
    out = kubectl.run("edit", "wfr", "ed", "-n", namespace).stdout
    assert "workflowrun.plnt.work/ed edited" in out
    assert kubectl.json("get", "wfr", "ed", "-n", namespace)["spec"]["replicas"] == 5


def test_delete_with_wait_returns_once_the_object_is_gone(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("gone", namespace))))
    out = kubectl.run("delete", "wfr", "gone", "-n", namespace, "--wait=true", "--timeout=30s")
    assert 'workflowrun.plnt.work "gone" deleted' in out.stdout
    missing = kubectl.run("get", "wfr", "gone", "-n", namespace, check=False)
    assert missing.returncode == 1
    assert 'workflowruns.plnt.work "gone" not found' in missing.stderr


def test_delete_waits_for_finalizers_to_be_removed(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    obj = manifest("fin", namespace)
    obj["metadata"]["finalizers"] = ["plnt.work/test"]  # type: ignore[index]
    kubectl.run("apply", "-f", str(write(tmp_path, obj)))
    kubectl.run("delete", "wfr", "fin", "-n", namespace, "--wait=false")
    marked = kubectl.json("get", "wfr", "fin", "-n", namespace)
    assert marked["metadata"]["deletionTimestamp"]
    kubectl.run(
        "patch",
        "wfr",
        "fin",
        "-n",
        namespace,
        "--type",
        "json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    missing = kubectl.run("get", "wfr", "fin", "-n", namespace, check=False)
    assert "not found" in missing.stderr


def test_explain_and_api_resources_describe_the_group(kubectl: Kubectl) -> None:
    resources = kubectl.run("api-resources", "--api-group=plnt.work").stdout
    assert "workflowruns" in resources and "wfr" in resources and "plntbackends" in resources
    explained = kubectl.run("explain", "workflowrun.spec").stdout
    assert "workflow" in explained and "replicas" in explained
    deeper = kubectl.run("explain", "wfr.spec.workflow.digest").stdout
    assert "sha256" in deeper


def test_wait_for_condition_ready_set_through_the_status_subresource(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("rdy", namespace))))
    with kubectl.background(
        "wait", "wfr/rdy", "-n", namespace, "--for=condition=Ready", "--timeout=60s"
    ) as waiter:
        status = {
            "status": {
                "phase": "Ready",
                "observedGeneration": 1,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Promoted",
                        "message": "revision 1 is serving",
                        "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        }
        kubectl.run(
            "patch",
            "wfr",
            "rdy",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        assert "condition met" in out
    got = kubectl.json("get", "wfr", "rdy", "-n", namespace)
    assert got["metadata"]["generation"] == 1  # status writes never bump generation
    assert got["status"]["phase"] == "Ready"


def test_dry_run_server_changes_nothing(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    path = write(tmp_path, manifest("dry", namespace))
    out = kubectl.run("apply", "-f", str(path), "--dry-run=server").stdout
    assert "created (server dry run)" in out
    missing = kubectl.run("get", "wfr", "dry", "-n", namespace, check=False)
    assert missing.returncode == 1


def test_unknown_field_is_rejected_with_strict_validation(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    obj = manifest("unk", namespace)
    obj["spec"]["replicaz"] = 3  # type: ignore[index]
    result = kubectl.run("apply", "-f", str(write(tmp_path, obj)), check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.replicaz"' in result.stderr
    warned = kubectl.run("apply", "-f", str(write(tmp_path, obj)), "--validate=warn")
    assert 'unknown field "spec.replicaz"' in warned.stderr
    got = kubectl.json("get", "wfr", "unk", "-n", namespace)
    assert "replicaz" not in got["spec"]


def test_invalid_spec_gets_422_listing_every_field(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    obj = manifest("bad", namespace, replicas=-1, target="mars")
    obj["spec"]["workflow"]["digest"] = "md5:nope"  # type: ignore[index]
    result = kubectl.run("apply", "-f", str(write(tmp_path, obj)), check=False)
    assert result.returncode != 0
    err = result.stderr
    assert 'The WorkflowRun "bad" is invalid' in err
    for field in ("spec.replicas", "spec.target", "spec.workflow.digest"):
        assert field in err


def test_replace_with_a_stale_resource_version_is_a_conflict(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("cf", namespace))))
    stale = kubectl.json("get", "wfr", "cf", "-n", namespace)
    kubectl.run("label", "wfr", "cf", "-n", namespace, "bump=1")
    stale["spec"]["replicas"] = 9
    result = kubectl.run("replace", "-f", str(write(tmp_path, stale, "stale.yaml")), check=False)
    assert result.returncode != 0
    assert 'Operation cannot be fulfilled on workflowruns.plnt.work "cf"' in result.stderr
    assert "the object has been modified" in result.stderr


def test_describe_shows_spec_and_events(kubectl: Kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("desc", namespace))))
    kubectl.run(
        "patch", "wfr", "desc", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":2}}'
    )
    out = wait_for(
        lambda: (
            (text := kubectl.run("describe", "wfr", "desc", "-n", namespace).stdout)
            and "SpecChanged" in text
            and text
        ),
        message="events in describe",
    )
    assert "Name:" in out and "desc" in out
    assert "Events:" in out
    assert "Accepted" in out
    events = kubectl.run("get", "events", "-n", namespace).stdout
    assert "workflowrun/desc" in events


def test_scale_sets_replicas_through_the_scale_subresource(
    kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    kubectl.run("apply", "-f", str(write(tmp_path, manifest("sc", namespace))))
    out = kubectl.run("scale", "wfr", "sc", "-n", namespace, "--replicas=3").stdout
    assert "workflowrun.plnt.work/sc scaled" in out
    assert kubectl.json("get", "wfr", "sc", "-n", namespace)["spec"]["replicas"] == 3


def test_unauthenticated_and_unauthorized_callers_are_refused(
    server: PlntServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "not-a-known-token"}
    anonymous = tmp_path / "anon.kubeconfig"
    anonymous.write_text(yaml.safe_dump(config))
    result = Kubectl(kubeconfig=anonymous, cache_dir=kubectl.cache_dir).run(
        "get", "wfr", check=False
    )
    assert result.returncode != 0
    assert "You must be logged in to the server" in result.stderr
    assert os.environ.get("KUBECONFIG") != str(anonymous)


def test_objects_survive_a_restart_with_the_same_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    with PlntServer(state) as srv:
        kubectl = Kubectl(kubeconfig=srv.kubeconfig, cache_dir=cache)
        kubectl.run("apply", "-f", str(write(tmp_path, manifest("keep", "default"))))
        before = kubectl.json("get", "wfr", "keep")
    with PlntServer(state, port=srv.port) as srv2:
        kubectl = Kubectl(kubeconfig=srv2.kubeconfig, cache_dir=cache)
        after = wait_for(lambda: kubectl.json("get", "wfr", "keep"), message="object after restart")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
