"""The pure parts of a run's HTTPRoute: the weights of each move, which route a run gets,
and the object, checked against the Gateway API's own schemas."""

from __future__ import annotations

import pytest

from plnt.api.workflowruns import GatewayReference, WorkflowRunSpec
from plnt.sagas import routing
from plnt.sagas.targets import routes
from plnt.sagas.values import RouteBackend, RunRef
from tests.support.kube import gateways

RUN = RunRef("team-a", "chat", "uid-1")
CLUSTER = routes.ClusterRoutes.parse(
    '{"gateway": {"name": "public", "namespace": "gateways"}, "hostnames": ["models.example.com"]}'
)


def pairs(backends: list[RouteBackend]) -> list[tuple[int, int]]:
    return [(b.revision, b.weight) for b in backends]


# --- the weights of each move ------------------------------------------------------------


@pytest.mark.parametrize("weight", [0, 1, 10, 50, 99, 100])
def test_a_canary_split_gives_the_stable_the_rest_and_adds_up_to_100(weight: int) -> None:
    plan = routing.canary(3, 4, weight)
    assert pairs(plan) == [(3, 100 - weight), (4, weight)]
    assert sum(b.weight for b in plan) == 100


def test_a_canary_weight_outside_0_to_100_is_refused() -> None:
    with pytest.raises(ValueError, match="percentage"):
        routing.canary(1, 2, 101)


def test_promotion_keeps_the_old_revision_at_0_while_it_drains_then_drops_it() -> None:
    assert pairs(routing.promoted(2, 1)) == [(2, 100), (1, 0)]
    assert pairs(routing.drained(2)) == [(2, 100)]


def test_a_first_promotion_or_a_redeploy_of_the_same_revision_has_one_backend() -> None:
    assert pairs(routing.promoted(1, None)) == [(1, 100)]
    assert pairs(routing.promoted(5, 5)) == [(5, 100)]


def test_withdrawing_a_canary_puts_everything_back_on_the_stable_revision() -> None:
    assert pairs(routing.withdrawn(7)) == [(7, 100)]


def test_a_plan_is_described_in_its_order() -> None:
    assert routing.describe(routing.canary(1, 2, 25)) == "revision 1: 75%, revision 2: 25%"


# --- which route a run gets -----------------------------------------------------------------


def test_a_run_without_spec_route_gets_none_unless_the_cluster_routes_every_run() -> None:
    assert routes.wanted(None, CLUSTER) is None
    assert routes.wanted(None, None) is None
    every = CLUSTER.model_copy(update={"every_run": True})
    wanted = routes.wanted(None, every)
    assert wanted is not None and wanted.gateway.name == "public"


def test_a_run_takes_the_clusters_defaults_for_what_it_leaves_out() -> None:
    wanted = routes.wanted({"path": "/chat"}, CLUSTER)
    assert wanted == routes.Route(
        GatewayReference(name="public", namespace="gateways"), ("models.example.com",), "/chat"
    )


def test_a_runs_own_gateway_and_hostnames_win_over_the_clusters() -> None:
    spec = {"gateway": {"name": "internal", "sectionName": "http"}, "hostnames": []}
    wanted = routes.wanted(spec, CLUSTER)
    assert wanted is not None
    assert (wanted.gateway.name, wanted.gateway.namespace) == ("internal", None)
    assert (wanted.hostnames, wanted.path) == ((), "/")


def test_a_run_may_opt_out_of_a_cluster_that_routes_every_run() -> None:
    every = CLUSTER.model_copy(update={"every_run": True})
    assert routes.wanted({"enabled": False}, every) is None


def test_a_route_the_worker_cannot_make_is_refused_saying_why() -> None:
    with pytest.raises(routes.RouteUnavailable, match="does not manage HTTPRoutes"):
        routes.wanted({}, None)
    with pytest.raises(routes.RouteUnavailable, match="no Gateway"):
        routes.wanted({}, routes.ClusterRoutes.parse("{}"))


def test_the_worker_flag_is_parsed_with_the_apis_own_rules() -> None:
    with pytest.raises(ValueError, match="--routes"):
        routes.ClusterRoutes.parse('{"path": "no-slash"}')
    with pytest.raises(ValueError, match="--routes"):
        routes.ClusterRoutes.parse('{"gatway": {}}')


def test_spec_route_is_part_of_the_workflowrun_spec() -> None:
    spec = WorkflowRunSpec.model_validate(
        {
            "workflow": {"ref": "oci-layout:x:1", "digest": "sha256:" + "0" * 64},
            "target": "kubernetes",
            "route": {"gateway": {"name": "public"}, "hostnames": ["a.example.com"]},
        }
    )
    assert spec.route is not None and spec.route.enabled
    assert spec.to_wire()["route"] == {
        "enabled": True,
        "gateway": {"name": "public"},
        "hostnames": ["a.example.com"],
    }


# --- the object ------------------------------------------------------------------------------


def test_the_route_sends_the_path_to_each_revisions_service_by_weight() -> None:
    wanted = routes.wanted({"path": "/v1"}, CLUSTER)
    assert wanted is not None
    route = routes.http_route(RUN, wanted, routing.canary(1, 2, 10), port=8080)
    assert route["metadata"]["name"] == "chat"
    assert route["metadata"]["namespace"] == "team-a"
    assert route["metadata"]["labels"]["plnt.work/run-uid"] == "uid-1"
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]
    assert [(b["name"], b["port"], b["weight"]) for b in rule["backendRefs"]] == [
        ("chat-r1", 8080, 90),
        ("chat-r2", 8080, 10),
    ]
    assert route["spec"]["hostnames"] == ["models.example.com"]


def test_every_route_of_a_deploy_passes_the_gateway_apis_own_schema() -> None:
    wanted = routes.Route(GatewayReference(name="gw", section_name="https"), (), "/")
    for plan in (routing.canary(1, 2, 25), routing.promoted(2, 1), routing.drained(2)):
        assert gateways.validate(routes.http_route(RUN, wanted, plan)) == []


def test_the_run_label_is_cut_as_the_runner_chart_cuts_it() -> None:
    assert routes.run_label("chat") == "chat"
    long = "a" * 70
    label = routes.run_label(long)
    assert len(label) == 63 and label.startswith("a" * 52 + "-")
