"""`kubectl get` and `get -w`: tables across namespaces and kinds, categories, sorting,
custom columns and templates, and watches that print each change once.

Each test is one thing a kubectl user does against kube-apiserver, checked for the same
outcome against a real `plnt up` (one per module; each test in its own namespace). What
still differs is listed in docs/kubectl-compatibility.md.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.e2e.manifests import REF, apply, backend_manifest, run_manifest
from tests.e2e.outputs import read_lines, rows
from tests.support.plnt_server import Kubectl

pytestmark = pytest.mark.e2e


def test_get_across_namespaces_adds_a_namespace_column_label_columns_and_kind_prefixes(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    first, second = f"x-{uuid.uuid4().hex[:8]}", f"y-{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", first)
    kubectl.run("create", "namespace", second)
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
    assert wide[0][4:10] == ["IN-FLIGHT", "QUEUE", "LATENCY", "GPU-HEADROOM", "GPU", "MODELS"]
    # an echo backend is never probed: no load, latency or GPU headroom is known
    assert wide[1][4:10] == ["<none>", "<none>", "<none>", "<none>", "cpu", "tiny"]


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
