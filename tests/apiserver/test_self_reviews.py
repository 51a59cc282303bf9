"""Self reviews, as `kubectl auth can-i` and `kubectl auth whoami` send them: a
SelfSubjectAccessReview in JSON or protobuf is answered from the server's own policy, and
a SelfSubjectReview names the caller and its groups.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import tls
from tests.support.api_server import Api

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (lengths here stay below 128)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _protobuf_ssar(**attributes: str) -> bytes:
    order = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
    inner = b"".join(
        _field(order.index(key) + 1, value.encode()) for key, value in attributes.items()
    )
    review = _field(2, _field(1, inner))  # spec.resourceAttributes
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SelfSubjectAccessReview")
    return b"k8s\x00" + _field(1, type_meta) + _field(2, review)


async def test_self_subject_access_review_answers_in_json_and_protobuf(api: Api) -> None:
    body = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "delete",
                "group": "plnt.work",
                "resource": "workflowruns",
            }
        },
    }
    reply = await api.call("POST", SSAR, body=body)
    assert reply.status == 201
    assert reply.json["kind"] == "SelfSubjectAccessReview"
    assert reply.json["status"] == {"allowed": True}
    assert reply.json["spec"] == body["spec"]
    proto = await api.call(
        "POST",
        SSAR,
        data=_protobuf_ssar(namespace="default", verb="get", group="plnt.work", resource="x"),
        headers={
            "Content-Type": "application/vnd.kubernetes.protobuf",
            "Accept": "application/vnd.kubernetes.protobuf,application/json",
        },
    )
    assert proto.status == 201 and proto.headers["Content-Type"] == "application/json"
    assert proto.json["spec"]["resourceAttributes"] == {
        "namespace": "default",
        "verb": "get",
        "group": "plnt.work",
        "resource": "x",
    }
    empty = await api.call("POST", SSAR, body={"spec": {}})
    assert empty.status == 422 and empty.json["reason"] == "Invalid"
    other = await api.call("POST", SSAR, data=b"x", headers={"Content-Type": "text/plain"})
    assert other.status == 415


async def test_a_viewer_may_review_itself_and_learns_what_it_may_not_do(
    api: Api, tmp_path: Path
) -> None:
    viewer = tls.write_client_cert(
        tls.client_ca(api.pki), tmp_path / "v", common_name="vic", organizations=["plnt:viewers"]
    )

    def review(verb: str) -> bytes:
        attributes = {"namespace": "default", "verb": verb, "group": "plnt.work"}
        attributes["resource"] = "workflowruns"
        return json.dumps({"spec": {"resourceAttributes": attributes}}).encode()

    async with tls.client_session(api.pki, cert=viewer) as session:
        headers = {"Content-Type": "application/json"}
        async with session.post(api.url + SSAR, data=review("list"), headers=headers) as reply:
            assert reply.status == 201
            assert (await reply.json())["status"]["allowed"] is True
        async with session.post(api.url + SSAR, data=review("delete"), headers=headers) as reply:
            assert reply.status == 201
            assert (await reply.json())["status"]["allowed"] is False
        async with session.post(api.url + SSR, data=b"{}", headers=headers) as reply:
            assert reply.status == 201
            who = (await reply.json())["status"]["userInfo"]
    assert who["username"] == "vic"
    assert who["groups"] == ["plnt:viewers", "system:authenticated"]
