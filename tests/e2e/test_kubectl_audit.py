"""Audit of kubectl habits against a real `plnt up`: each test is one thing a kubectl user
does against kube-apiserver, checked for the same outcome here.

One server per module keeps the suite fast; each test works in its own namespace.
What still differs from kube-apiserver is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from plnt.apiserver import pki as pki_module
from tests.support import tls
from tests.support.plnt_server import Kubectl, PlntServer, wait_for

pytestmark = pytest.mark.e2e

DIGEST = "sha256:" + "ef" * 32
REF = "oci://127.0.0.1:5000/wf/audit:1"


def run_manifest(name: str, namespace: str, *, replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name, **labels}},
        "spec": {
            "workflow": {"ref": REF, "digest": DIGEST},
            "backend": {"name": "echo"},
            "replicas": replicas,
        },
    }


def backend_manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "echo", "models": ["tiny"], "gpuClass": "cpu"},
    }


def apply(kubectl: Kubectl, tmp_path: Path, *objects: dict[str, Any]) -> None:
    path = tmp_path / f"objects-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    kubectl.run("apply", "-f", str(path))


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


def open_watches(kubectl: Kubectl) -> float:
    """The server's gauge of open WorkflowRun watches, read from /metrics."""
    metrics = kubectl.run("get", "--raw", "/metrics").stdout
    pattern = r'^plnt_apiserver_open_watches\{resource="workflowruns"\} (\S+)$'
    found = re.search(pattern, metrics, re.M)
    return float(found.group(1)) if found else 0.0


def read_lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    assert proc.stdout is not None
    return [proc.stdout.readline().rstrip("\n") for _ in range(count)]


# --- get: tables, several types, categories, sorting, templates ---------------------------


def test_get_across_namespaces_adds_a_namespace_column_label_columns_and_kind_prefixes(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    first, second = f"x-{uuid.uuid4().hex[:8]}", f"y-{uuid.uuid4().hex[:8]}"
    apply(
        kubectl,
        tmp_path,
        run_manifest("one", first, tier="gold"),
        run_manifest("two", second, tier="silver"),
    )
    table = rows(kubectl.run("get", "wfr", "-A", "-L", "tier", "--show-kind").stdout)
    assert table[0][:2] == ["NAMESPACE", "NAME"] and table[0][-1] == "TIER"
    mine = {r[0]: r for r in table[1:] if r[0] in (first, second)}
    assert mine[first][1] == "workflowrun.plnt.work/one" and mine[first][-1] == "gold"
    assert mine[second][1] == "workflowrun.plnt.work/two" and mine[second][-1] == "silver"


def test_get_of_several_types_and_of_the_plnt_category_prints_one_table_per_kind(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("run", ns), backend_manifest("be", ns))
    for what in ("wfr,pb", "plnt"):
        out = kubectl.run("get", what, "-n", ns).stdout
        blocks = [rows(block) for block in out.strip().split("\n\n")]
        assert len(blocks) == 2, out
        assert blocks[0][0][:2] == ["NAME", "WORKFLOW"]
        assert blocks[0][1][0] == "workflowrun.plnt.work/run"
        assert blocks[1][0] == ["NAME", "TYPE", "ENDPOINT", "REACHABLE", "AGE"]
        assert blocks[1][1][:2] == ["plntbackend.plnt.work/be", "echo"]
    wide = rows(kubectl.run("get", "pb", "be", "-n", ns, "-o", "wide").stdout)
    assert wide[0][4:8] == ["IN-FLIGHT", "QUEUE", "GPU", "MODELS"]
    assert wide[1][4:8] == ["<none>", "<none>", "cpu", "tiny"]  # an echo backend reports no load


def test_watch_with_the_table_printer_prints_columns_once_and_each_change_once(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, run_manifest("w", ns))
    with (
        kubectl.background("get", "wfr", "-n", ns, "-w") as listing,
        kubectl.background("get", "wfr", "w", "-n", ns, "-w") as single,
    ):
        # Both print the current state first: header plus one row.
        assert read_lines(listing, 2)[1].split()[0] == "w"
        assert read_lines(single, 2)[1].split()[0] == "w"
        kubectl.run("patch", "wfr", "w", "-n", ns, "--type=merge", "-p", '{"spec":{"replicas":3}}')
        assert read_lines(listing, 1)[0].split()[:4] == ["w", REF, "echo", "0/3"]
        # A single-name watch starts at resourceVersion 0: its synthetic ADDED is hidden,
        # so the next line is the change, not the object again.
        assert read_lines(single, 1)[0].split()[:4] == ["w", REF, "echo", "0/3"]
        apply(kubectl, tmp_path, run_manifest("w2", ns))
        assert read_lines(listing, 1)[0].split()[0] == "w2"
        kubectl.run("delete", "wfr", "w2", "-n", ns)
        assert read_lines(listing, 1)[0].split()[0] == "w2"
        # The next lines are the next change: nothing was printed twice, and no
        # header was repeated.
        kubectl.run("patch", "wfr", "w", "-n", ns, "--type=merge", "-p", '{"spec":{"replicas":1}}')
        assert read_lines(listing, 1)[0].split()[:4] == ["w", REF, "echo", "0/1"]
        assert read_lines(single, 1)[0].split()[:4] == ["w", REF, "echo", "0/1"]


def test_sort_by_custom_columns_and_go_template_read_the_full_objects(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    apply(
        kubectl,
        tmp_path,
        run_manifest("big", ns, replicas=5),
        run_manifest("small", ns, replicas=0),
        run_manifest("mid", ns, replicas=2),
    )
    by_replicas = rows(kubectl.run("get", "wfr", "-n", ns, "--sort-by=.spec.replicas").stdout)
    assert [r[0] for r in by_replicas[1:]] == ["small", "mid", "big"]
    custom = kubectl.run(
        "get", "wfr", "-n", ns, "-o", "custom-columns=NAME:.metadata.name,WANT:.spec.replicas"
    ).stdout
    assert rows(custom) == [["NAME", "WANT"], ["big", "5"], ["mid", "2"], ["small", "0"]]
    template = kubectl.run(
        "get",
        "wfr",
        "-n",
        ns,
        "-o",
        "go-template={{range .items}}{{.metadata.name}}={{.spec.replicas}};{{end}}",
    ).stdout
    assert template == "big=5;mid=2;small=0;"


# --- events, describe, explain ------------------------------------------------------------


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


# --- create, delete, wait -----------------------------------------------------------------


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


# --- discovery, version, raw calls, auth -------------------------------------------------


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


def test_cluster_info_fails_because_standalone_plnt_serves_no_services(kubectl: Kubectl) -> None:
    result = kubectl.run("cluster-info", check=False)
    assert result.returncode == 1
    assert 'the server doesn\'t have a resource type "services"' in result.stderr


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


# --- metadata and spec changes ------------------------------------------------------------


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


def test_plnt_up_on_a_busy_port_says_so_in_one_line_and_leaves_no_etcd(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_plnt_up(tmp_path / "state", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: address already in use"
    )
    assert "Traceback" not in result.stderr
    assert not processes_mentioning(str(tmp_path / "state"))


def run_plnt_up(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`plnt up` expected to refuse to start: it must exit by itself."""
    return subprocess.run(
        [sys.executable, "-m", "plnt", "up", "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


def test_plnt_up_refuses_an_invalid_policy_file_before_starting_anything(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules:\n- groups: [x]\n  verbz: [get]\n")
    result = run_plnt_up(tmp_path / "state", "--port", "1", "--policy-file", str(policy))
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {policy} is invalid: ")
    assert "rules.0.verbz" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "etcd").exists()
