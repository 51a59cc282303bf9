"""TokenReview, SubjectAccessReview and the stand-in's own 401 and 403, as kube words them."""

from __future__ import annotations

from tests.support.kube import policy, standin
from tests.support.kube.clients import post, session


def auth_delegator(kube: standin.KubeStandIn, user: str) -> None:
    for group, resource in (
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    ):
        kube.allow(
            policy.Rule(
                verbs=("create",),
                user=user,
                api_groups=(group,),
                resources=(resource,),
                name="system:auth-delegator",
            )
        )


async def test_token_review_answers_the_user_of_a_known_token_and_not_of_an_unknown_one(
    kube: standin.KubeStandIn, token: str
) -> None:
    kube.add_user(token, "plnt-sa", ["system:serviceaccounts"])
    auth_delegator(kube, "plnt-sa")
    kube.add_user("alice-token", "alice", ["dev"], uid="u-1", extra={"scopes.example.com/x": ["a"]})
    reviews = "/apis/authentication.k8s.io/v1/tokenreviews"
    async with session(kube, token) as client:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
        code, known = await post(client, reviews, {**review, "spec": {"token": "alice-token"}})
        _, unknown = await post(client, reviews, {**review, "spec": {"token": "nope"}})
        invalid_code, invalid = await post(
            client, reviews, {**review, "spec": {"token": "x", "tokn": 1}}
        )
    assert code == 201
    assert known["status"] == {
        "authenticated": True,
        "user": {
            "username": "alice",
            "uid": "u-1",
            "groups": ["dev", "system:authenticated"],
            "extra": {"scopes.example.com/x": ["a"]},
        },
        "audiences": ["https://kubernetes.default.svc.cluster.local"],
    }
    assert unknown["status"] == {"user": {}}
    assert invalid_code == 422
    assert invalid["details"]["causes"][0]["field"] == "spec.tokn"
    assert [r["spec"]["token"] for r in kube.token_reviews][-2:] == ["alice-token", "nope"]


async def test_subject_access_review_is_decided_by_the_policy_and_recorded(
    kube: standin.KubeStandIn, token: str
) -> None:
    kube.add_user(token, "plnt-sa-2")
    auth_delegator(kube, "plnt-sa-2")
    kube.allow(
        policy.Rule(
            verbs=("get", "list"),
            group="viewers",
            api_groups=("plnt.work",),
            resources=("workflowruns",),
            name="plnt-viewer",
        )
    )
    spec = {
        "user": "bob",
        "groups": ["viewers"],
        "resourceAttributes": {
            "verb": "list",
            "group": "plnt.work",
            "resource": "workflowruns",
            "namespace": "ns",
        },
    }
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"}
    async with session(kube, token) as client:
        _, allowed = await post(
            client, "/apis/authorization.k8s.io/v1/subjectaccessreviews", {**sar, "spec": spec}
        )
        denied_spec = {
            **spec,
            "resourceAttributes": {**spec["resourceAttributes"], "verb": "delete"},
        }
        _, denied = await post(
            client,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {**sar, "spec": denied_spec},
        )
        code, invalid = await post(
            client,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {**sar, "spec": {"user": "x"}},
        )
    assert allowed["status"] == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "plnt-viewer" '
        'of ClusterRole "plnt-viewer" to Group "viewers"',
    }
    assert denied["status"] == {"allowed": False}
    assert code == 422 and invalid["reason"] == "Invalid"
    assert invalid["message"].startswith(
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes'
    )
    recorded = [r["spec"]["resourceAttributes"]["verb"] for r in kube.subject_access_reviews[-2:]]
    assert recorded == ["list", "delete"]


async def test_an_unknown_token_gets_401_and_a_user_without_permission_gets_kubes_403(
    kube: standin.KubeStandIn, token: str
) -> None:
    kube.add_user(token, "carol")
    async with (
        session(kube, "wrong") as client,
        client.get("/api/v1/namespaces/default/events") as response,
    ):
        assert response.status == 401
        assert await response.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
    async with session(kube, token) as client:
        async with client.get("/api/v1/namespaces/default/events") as response:
            assert response.status == 403
            body = await response.json()
        token_review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": "t"},
        }
        _, review = await post(client, "/apis/authentication.k8s.io/v1/tokenreviews", token_review)
    assert body["message"] == (
        'events is forbidden: User "carol" cannot list resource "events" '
        'in API group "" in the namespace "default"'
    )
    assert body["details"] == {"kind": "events"}
    assert review["message"] == (
        'tokenreviews.authentication.k8s.io is forbidden: User "carol" cannot create '
        'resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope'
    )
