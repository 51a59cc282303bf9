"""Authorization: kube's exact 403 wording, the policy file, the default policy, and
the union of authorizers."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.apiserver import authz
from plnt.apiserver.app import STANDALONE_RESOURCES
from plnt.apiserver.authn import UserInfo
from plnt.apiserver.authz import Attributes, Decision

ALICE = UserInfo(name="alice", groups=("plnt:viewers", "system:authenticated"))
INVOKER = UserInfo(name="ivan", groups=("plnt:invokers", "system:authenticated"))
NOBODY = UserInfo(name="u", groups=("system:authenticated",))
ADMIN = UserInfo(name="plnt-admin", groups=("system:masters", "system:authenticated"))


def resource(
    user: UserInfo,
    verb: str,
    res: str,
    *,
    namespace: str = "ns",
    name: str = "",
    subresource: str = "",
    group: str = "plnt.work",
) -> Attributes:
    path = f"/apis/{group}/v1/namespaces/{namespace}/{res}" + (f"/{name}" if name else "")
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version="v1",
        namespace=namespace,
        resource=res,
        subresource=subresource,
        name=name,
    )


def path(user: UserInfo, route: str, verb: str = "get") -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=False, path=route)


# --- 403 wording ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            resource(NOBODY, "get", "workflowruns", name="x"),
            'workflowruns.plnt.work "x" is forbidden: User "u" cannot get resource '
            '"workflowruns" in API group "plnt.work" in the namespace "ns"',
        ),
        (
            resource(NOBODY, "create", "workflowruns", name="x", subresource="invoke"),
            'workflowruns.plnt.work "x" is forbidden: User "u" cannot create resource '
            '"workflowruns/invoke" in API group "plnt.work" in the namespace "ns"',
        ),
        (
            resource(NOBODY, "list", "workflowruns"),
            'workflowruns.plnt.work is forbidden: User "u" cannot list resource '
            '"workflowruns" in API group "plnt.work" in the namespace "ns"',
        ),
        (
            resource(NOBODY, "list", "workflowruns", namespace=""),
            'workflowruns.plnt.work is forbidden: User "u" cannot list resource '
            '"workflowruns" in API group "plnt.work" at the cluster scope',
        ),
        (
            resource(NOBODY, "list", "events", group=""),
            'events is forbidden: User "u" cannot list resource "events" '
            'in API group "" in the namespace "ns"',
        ),
        (
            path(NOBODY, "/apis"),
            'forbidden: User "u" cannot get path "/apis"',
        ),
        (
            path(UserInfo(name='a"<b>'), "/x&y", verb="post"),
            'forbidden: User "a\\"&lt;b&gt;" cannot post path "/x&amp;y"',
        ),
    ],
)
def test_forbidden_message_matches_kube_apiserver_exactly(
    attributes: Attributes, message: str
) -> None:
    assert authz.forbidden_message(attributes) == message


def test_forbidden_message_appends_a_non_empty_reason_after_a_colon() -> None:
    message = authz.forbidden_message(path(NOBODY, "/metrics"), reason="no rule")

    assert message == 'forbidden: User "u" cannot get path "/metrics": no rule'


def test_forbidden_details_name_the_plural_resource_as_kind() -> None:
    details = authz.forbidden_status_details(
        resource(NOBODY, "create", "workflowruns", name="x", subresource="invoke")
    )

    assert details == {"name": "x", "group": "plnt.work", "kind": "workflowruns"}


# --- the default standalone chain ----------------------------------------------------------------


STANDALONE_CASES = [
    (resource(ADMIN, "delete", "plntbackends", name="b"), Decision.ALLOW),
    (path(ADMIN, "/metrics"), Decision.ALLOW),
    (resource(ALICE, "list", "workflowruns"), Decision.ALLOW),
    (resource(ALICE, "watch", "events", group=""), Decision.ALLOW),
    (resource(ALICE, "get", "workflowruns", name="x", subresource="status"), Decision.ALLOW),
    (resource(ALICE, "create", "workflowruns"), Decision.DENY),
    (resource(ALICE, "create", "workflowruns", name="x", subresource="invoke"), Decision.DENY),
    (
        resource(INVOKER, "create", "workflowruns", name="x", subresource="invoke"),
        Decision.ALLOW,
    ),
    (
        resource(INVOKER, "create", "workflowruns", name="x", subresource="rollback"),
        Decision.DENY,
    ),
    (resource(INVOKER, "get", "workflowruns", name="x"), Decision.DENY),
    (path(NOBODY, "/apis"), Decision.ALLOW),
    (path(NOBODY, "/apis/plnt.work/v1"), Decision.ALLOW),
    (path(NOBODY, "/openapi/v3"), Decision.ALLOW),
    (path(NOBODY, "/version"), Decision.ALLOW),
    (path(NOBODY, "/apis", verb="post"), Decision.DENY),
    (path(NOBODY, "/metrics"), Decision.DENY),
    (resource(NOBODY, "list", "workflowruns"), Decision.DENY),
    (path(UserInfo(name="anonymous"), "/healthz"), Decision.ALLOW),
    (path(UserInfo(name="anonymous"), "/readyz"), Decision.ALLOW),
    (path(UserInfo(name="anonymous"), "/healthz/etcd"), Decision.DENY),
    (path(UserInfo(name="anonymous"), "/apis"), Decision.DENY),
]


@pytest.mark.parametrize(("attributes", "decision"), STANDALONE_CASES)
async def test_standalone_chain_grants_admins_viewers_invokers_and_discovery(
    attributes: Attributes, decision: Decision
) -> None:
    assert (
        await authz.standalone_authorizer(definitions=STANDALONE_RESOURCES).authorize(attributes)
    )[0] is decision


@pytest.mark.parametrize(("attributes", "decision"), STANDALONE_CASES)
def test_the_standalone_chain_decides_in_place_as_it_authorizes(
    attributes: Attributes, decision: Decision
) -> None:
    # The request pipeline asks `decide_now` first: no coroutine for these authorizers.
    assert authz.decide_now(
        authz.standalone_authorizer(definitions=STANDALONE_RESOURCES), attributes
    ) == (decision, "")


async def test_a_denial_by_the_default_chain_carries_no_reason_so_the_message_is_kubes() -> None:
    decided = await authz.standalone_authorizer(definitions=STANDALONE_RESOURCES).authorize(
        path(NOBODY, "/metrics")
    )
    assert decided == (Decision.DENY, "")


# --- policy files ---------------------------------------------------------------------------------


POLICY = """
rules:
- users: [robot]
  verbs: [get, update]
  resources: [workflowruns]
  namespaces: [prod]
  resourceNames: [summarize]
- groups: [auditors]
  verbs: ["*"]
  apiGroups: [""]
  resources: [events]
- groups: [scalers]
  verbs: [update, patch]
  resources: ["*/scale"]
- groups: [statusers]
  verbs: [get]
  resources: ["workflowruns/*"]
- groups: [metrics]
  verbs: [get]
  nonResourcePaths: [/metrics]
"""


@pytest.fixture
def policy(tmp_path: Path) -> authz.PolicyAuthorizer:
    file = tmp_path / "policy.yaml"
    file.write_text(POLICY)
    return authz.PolicyAuthorizer.from_file(file)


def user(name: str, *groups: str) -> UserInfo:
    return UserInfo(name=name, groups=groups)


ROBOT, AUDITOR, SCALER = user("robot"), user("a", "auditors"), user("s", "scalers")
STATUSER, METRICS = user("t", "statusers"), user("m", "metrics")
YES, NO = Decision.ALLOW, Decision.NO_OPINION


@pytest.mark.parametrize(
    ("attributes", "decision"),
    [
        (resource(ROBOT, "get", "workflowruns", namespace="prod", name="summarize"), YES),
        (resource(ROBOT, "get", "workflowruns", namespace="dev", name="summarize"), NO),
        (resource(ROBOT, "get", "workflowruns", namespace="prod", name="other"), NO),
        (resource(ROBOT, "list", "workflowruns", namespace="prod"), NO),
        (resource(ROBOT, "delete", "workflowruns", namespace="prod", name="summarize"), NO),
        (
            resource(
                ROBOT,
                "get",
                "workflowruns",
                namespace="prod",
                name="summarize",
                subresource="status",
            ),
            NO,
        ),
        (resource(AUDITOR, "list", "events", group=""), YES),
        (resource(AUDITOR, "list", "events", group="events.k8s.io"), NO),
        (resource(SCALER, "update", "workflowruns", name="x", subresource="scale"), YES),
        (resource(SCALER, "update", "workflowruns", name="x"), NO),
        (resource(STATUSER, "get", "workflowruns", name="x", subresource="status"), YES),
        (resource(STATUSER, "get", "workflowruns", name="x"), NO),
        (path(METRICS, "/metrics"), YES),
        (path(METRICS, "/metrics/extra"), NO),
        (resource(METRICS, "get", "metrics", name="x"), NO),
    ],
)
async def test_policy_rules_match_subjects_verbs_groups_namespaces_names_and_subresources(
    policy: authz.PolicyAuthorizer, attributes: Attributes, decision: Decision
) -> None:
    assert (await policy.authorize(attributes))[0] is decision


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ("rules:\n- verbs: [get]\n  resources: [x]\n", "needs users or groups"),
        ("rules:\n- users: [a]\n  verbs: [get]\n", "exactly one of resources or nonResourcePaths"),
        (
            "rules:\n- users: [a]\n  verbs: [get]\n  resources: [x]\n  nonResourcePaths: [/x]\n",
            "exactly one of resources or nonResourcePaths",
        ),
        ("rules:\n- users: [a]\n  verbs: [get]\n  resources: [x]\n  verb: [y]\n", "rules.0.verb"),
        ("rules:\n- users: [a]\n  resources: [x]\n", "rules.0.verbs: Field required"),
        ("rules: [\n", "not valid YAML"),
    ],
)
def test_an_invalid_policy_file_is_rejected_at_load_time_with_the_problem_named(
    tmp_path: Path, document: str, complaint: str
) -> None:
    file = tmp_path / "policy.yaml"
    file.write_text(document)

    with pytest.raises(authz.PolicyError, match=complaint):
        authz.load_policy(file)


async def test_an_empty_policy_file_grants_nothing_but_admins_and_health_still_pass(
    tmp_path: Path,
) -> None:
    file = tmp_path / "policy.yaml"
    file.write_text("")
    chain = authz.standalone_authorizer(authz.load_policy(file))

    assert (await chain.authorize(path(NOBODY, "/apis")))[0] is Decision.DENY
    assert (await chain.authorize(path(NOBODY, "/livez")))[0] is Decision.ALLOW
    assert (await chain.authorize(resource(ADMIN, "create", "workflowruns")))[0] is Decision.ALLOW


# --- union --------------------------------------------------------------------------------------


class Canned:
    def __init__(self, decision: Decision, reason: str = "") -> None:
        self.answer = (decision, reason)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.answer


async def test_union_takes_the_first_decisive_answer() -> None:
    union = authz.UnionAuthorizer(
        [Canned(Decision.NO_OPINION), Canned(Decision.DENY, "blocked"), Canned(Decision.ALLOW)]
    )

    assert await union.authorize(path(NOBODY, "/x")) == (Decision.DENY, "blocked")


async def test_union_denies_when_nobody_has_an_opinion_and_joins_their_reasons() -> None:
    union = authz.UnionAuthorizer(
        [Canned(Decision.NO_OPINION, "webhook unreachable"), Canned(Decision.NO_OPINION, "")]
    )

    assert await union.authorize(path(NOBODY, "/x")) == (Decision.DENY, "webhook unreachable")


def test_a_union_decides_in_place_only_until_an_authorizer_that_must_be_awaited() -> None:
    union = authz.UnionAuthorizer(
        [
            authz.AlwaysAllowGroupsAuthorizer(),
            authz.AlwaysAllowPathsAuthorizer(),
            Canned(Decision.ALLOW),
        ]
    )

    assert authz.decide_now(union, resource(ADMIN, "create", "workflowruns")) == (
        Decision.ALLOW,
        "",
    )
    assert authz.decide_now(union, path(NOBODY, "/healthz")) == (Decision.ALLOW, "")
    assert authz.decide_now(union, resource(NOBODY, "create", "workflowruns")) is None
    assert authz.decide_now(Canned(Decision.ALLOW), path(ADMIN, "/x")) is None


class Failing:
    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        raise authz.AuthorizerError("subjectaccessreviews: connection refused")


async def test_union_raises_an_authorizer_error_when_nobody_allows_but_one_failed() -> None:
    union = authz.UnionAuthorizer([Failing(), Canned(Decision.NO_OPINION)])
    with pytest.raises(authz.AuthorizerError, match="connection refused"):
        await union.authorize(path(NOBODY, "/x"))
    denying = authz.UnionAuthorizer([Failing(), Canned(Decision.DENY, "no")])
    with pytest.raises(authz.AuthorizerError):
        await denying.authorize(path(NOBODY, "/x"))


async def test_union_still_allows_when_a_later_authorizer_allows_after_a_failure() -> None:
    union = authz.UnionAuthorizer([Failing(), Canned(Decision.ALLOW)])
    assert await union.authorize(path(NOBODY, "/x")) == (Decision.ALLOW, "")
