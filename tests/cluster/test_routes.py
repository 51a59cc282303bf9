"""Canary weights where applications send their traffic: a run's Gateway API HTTPRoute.

The worker runs with `--routes` (the Gateway `gateways/public` by default); a run with
`spec.route` gets an HTTPRoute named as the run whose backendRefs are its revisions'
Services. The test follows the route's weights, the run's `status.traffic` (what plnt's
own `…/invoke` and `…/proxy` split by) and the `TrafficShifted` Events through a canary
held by its pause, once promoted and once aborted (rolled back). Every route the worker
applies is validated by the stand-in against the Gateway API's own schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import Cluster, published, run_manifest
from tests.support.plnt_server import Kubectl, wait_for

RUN = "chat"


def manifest(cluster: Cluster, tag: str) -> dict[str, Any]:
    ref, digest = published(cluster, tag)
    run = run_manifest(RUN, ref, digest)
    run["spec"].update(
        target="kubernetes",
        route={"hostnames": ["chat.example.com"], "path": "/v1"},
        canary={"weight": 25, "pauseSeconds": 3600},
    )
    return run


def route_of(admin: Kubectl, namespace: str) -> dict[str, Any] | None:
    found = admin.run("get", "httproutes", "-n", namespace, "-o", "json").stdout
    items = json.loads(found)["items"]
    return items[0] if items else None


def weights(admin: Kubectl, namespace: str) -> list[tuple[str, int]] | None:
    route = route_of(admin, namespace)
    if route is None:
        return None
    return [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]]


def traffic(user: Kubectl, namespace: str) -> list[tuple[int, int]]:
    obj = json.loads(user.run("get", "-n", namespace, "wfr", RUN, "-o", "json").stdout)
    return [(t["revision"], t["weight"]) for t in (obj.get("status") or {}).get("traffic") or []]


def shifts(admin: Kubectl, namespace: str) -> list[str]:
    """The messages of the run's TrafficShifted Events, oldest first."""
    found = admin.run(
        "get", "events", "-n", namespace, "-o", "json",
        "--field-selector", f"involvedObject.name={RUN},reason=TrafficShifted",
    ).stdout  # fmt: skip
    items = json.loads(found)["items"]
    items.sort(key=lambda e: e.get("eventTime") or e.get("firstTimestamp") or "")
    return [e["message"] for e in items]


def steer(user: Kubectl, namespace: str, verb: str, tmp_path: Path) -> None:
    body = tmp_path / "empty.json"
    body.write_text("{}")
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{RUN}/{verb}"
    user.run("create", "--raw", path, "-f", str(body))


def deploy_canary(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl, tags: tuple[str, str]
) -> None:
    """Revision 1 promoted (the route made, all on it), then revision 2 holding 25%."""
    user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest(cluster, tags[0])))
    user.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{RUN}", "--timeout=150s")
    wait_for(
        lambda: weights(admin, namespace) == [("chat-r1", 100)], timeout=60, message="route r1"
    )
    route = route_of(admin, namespace)
    assert route is not None
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public",
         "namespace": "gateways"}
    ]  # fmt: skip
    assert route["spec"]["hostnames"] == ["chat.example.com"]
    assert route["spec"]["rules"][0]["matches"] == [
        {"path": {"type": "PathPrefix", "value": "/v1"}}
    ]
    assert route["spec"]["rules"][0]["backendRefs"][0]["port"] == 80

    user.run("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest(cluster, tags[1])))
    split = [("chat-r1", 75), ("chat-r2", 25)]
    wait_for(lambda: weights(admin, namespace) == split, timeout=150, message="route 75/25")
    # plnt's own invoke and proxy split by status.traffic: the same weights.
    wait_for(lambda: traffic(user, namespace) == [(1, 75), (2, 25)], timeout=30, message="75/25")


def test_a_promoted_canary_moves_the_route_to_itself_then_drops_the_drained_revision(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl, tmp_path: Path
) -> None:
    deploy_canary(cluster, namespace, user, admin, ("51", "52"))
    steer(user, namespace, "promote", tmp_path)

    wait_for(lambda: weights(admin, namespace) == [("chat-r2", 100)], timeout=60, message="r2")
    wait_for(lambda: traffic(user, namespace) == [(2, 100)], timeout=30, message="traffic r2")
    route = f"HTTPRoute {namespace}/{RUN}"
    expected = [
        f"{route}: revision 1: 100% (revision 1 promoted)",
        f"{route}: revision 1: 75%, revision 2: 25%",
        f"{route}: revision 2: 100%, revision 1: 0% (revision 2 promoted)",
        f"{route}: revision 2: 100% (revision 1 drained)",
    ]
    wait_for(lambda: shifts(admin, namespace) == expected, timeout=30, message="four moves")
    wait_for(
        lambda: "chat-r1" not in admin.run("get", "services", "-n", namespace, "-o", "name").stdout,
        timeout=60,
        message="revision 1 uninstalled",
    )

    user.run("delete", "-n", namespace, f"wfr/{RUN}", "--timeout=120s")
    assert route_of(admin, namespace) is None


def test_a_rolled_back_canary_puts_the_route_back_on_the_stable_revision(
    cluster: Cluster, namespace: str, user: Kubectl, admin: Kubectl, tmp_path: Path
) -> None:
    deploy_canary(cluster, namespace, user, admin, ("53", "54"))
    steer(user, namespace, "abort", tmp_path)

    wait_for(lambda: weights(admin, namespace) == [("chat-r1", 100)], timeout=60, message="r1")
    wait_for(lambda: traffic(user, namespace) == [(1, 100)], timeout=30, message="traffic r1")
    route = f"HTTPRoute {namespace}/{RUN}"
    expected = [
        f"{route}: revision 1: 100% (revision 1 promoted)",
        f"{route}: revision 1: 75%, revision 2: 25%",
        f"{route}: revision 1: 100% (back to the stable revision)",
    ]
    wait_for(lambda: shifts(admin, namespace) == expected, timeout=30, message="three moves")
    wait_for(
        lambda: "chat-r2" not in admin.run("get", "services", "-n", namespace, "-o", "name").stdout,
        timeout=60,
        message="the canary's release uninstalled",
    )
    status = json.loads(user.run("get", "-n", namespace, "wfr", RUN, "-o", "json").stdout)
    steps = {s["name"]: s for s in status["status"]["saga"]}
    assert steps["route"]["state"] == "Succeeded"
    assert steps["rollback"]["state"] == "Compensated"

    user.run("delete", "-n", namespace, f"wfr/{RUN}", "--timeout=120s")
    assert route_of(admin, namespace) is None
