"""`POST …/rollback` and `POST …/abort`: rollback rewrites the spec through the ordinary
update path; abort asks the saga (here `RecordingDeploy`, an in-memory stand-in for
Temporal) to cancel the deploy in flight.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.promotions import digest, promoted
from tests.support.recording_deploy import RecordingDeploy

MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_rollback_without_a_revision_returns_to_the_previous_one(api: Api) -> None:
    before = await promoted(api, "r", revisions=3)
    reply = await api.call("POST", f"{BASE}/r/rollback")
    assert reply.status == 200, reply.text
    obj = reply.json
    assert obj["kind"] == "WorkflowRun"
    assert obj["spec"]["workflow"] == {"ref": "oci://r.example/wf:2", "digest": digest(2)}
    assert obj["metadata"]["generation"] == before["metadata"]["generation"] + 1
    annotations = obj["metadata"]["annotations"]
    assert annotations["plnt.work/rollback-to"] == "2"
    assert annotations["plnt.work/rollback-generation"] == str(obj["metadata"]["generation"])
    stored = (await api.call("GET", f"{BASE}/r")).json
    assert stored["spec"]["workflow"]["digest"] == digest(2)
    assert stored["status"]["revision"] == 3


async def test_rollback_to_a_named_revision_accepts_the_full_body(api: Api) -> None:
    await promoted(api, "r", revisions=3)
    reply = await api.call(
        "POST",
        f"{BASE}/r/rollback",
        body={"apiVersion": "plnt.work/v1", "kind": "WorkflowRunRollback", "toRevision": 1},
    )
    assert reply.status == 200, reply.text
    assert reply.json["spec"]["workflow"]["digest"] == digest(1)


async def test_rollback_dry_run_answers_the_result_and_changes_nothing(api: Api) -> None:
    before = await promoted(api, "r", revisions=2)
    reply = await api.call("POST", f"{BASE}/r/rollback", body={}, params={"dryRun": "All"})
    assert reply.status == 200
    assert reply.json["spec"]["workflow"]["digest"] == digest(1)
    stored = (await api.call("GET", f"{BASE}/r")).json
    assert stored["spec"] == before["spec"]
    assert stored["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_rollback_with_no_earlier_revision_is_a_400(api: Api) -> None:
    await promoted(api, "first", revisions=1)
    reply = await api.call("POST", f"{BASE}/first/rollback", body={})
    assert reply.status == 400
    assert reply.json["message"] == "workflowrun first has no earlier revision to roll back to"
    assert (await api.call("POST", BASE, body=workflowrun("new"))).status == 201
    fresh = await api.call("POST", f"{BASE}/new/rollback")
    assert fresh.status == 400


async def test_rollback_to_an_unknown_revision_is_422_listing_the_known_ones(api: Api) -> None:
    await promoted(api, "r", revisions=2)
    reply = await api.call("POST", f"{BASE}/r/rollback", body={"toRevision": 7})
    assert reply.status == 422
    cause = reply.json["details"]["causes"][0]
    assert cause["field"] == "toRevision"
    assert "known revisions: 1, 2" in cause["message"]
    bad = await api.call("POST", f"{BASE}/r/rollback", body={"toRevision": "two"})
    assert bad.status == 422
    unknown = await api.call("POST", f"{BASE}/r/rollback", body={"to": 1})
    assert unknown.status == 422


async def test_rollback_to_the_revision_the_spec_already_pins_is_a_409(api: Api) -> None:
    await promoted(api, "r", revisions=2)
    reply = await api.call("POST", f"{BASE}/r/rollback", body={"toRevision": 2})
    assert reply.status == 409
    assert reply.json["reason"] == "Conflict"
    assert "nothing to roll back" in reply.json["message"]


async def test_rollback_to_the_promoted_revision_undoes_a_deploy_in_flight(api: Api) -> None:
    await promoted(api, "r", revisions=2)
    newer = {"spec": {"workflow": {"ref": "oci://r.example/wf:9", "digest": digest(9)}}}
    assert (await api.call("PATCH", f"{BASE}/r", body=newer, headers=MERGE)).status == 200
    reply = await api.call("POST", f"{BASE}/r/rollback", body={"toRevision": 2})
    assert reply.status == 200
    assert reply.json["spec"]["workflow"]["digest"] == digest(2)


async def test_rollback_is_submitted_to_the_saga_as_a_new_generation(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        await promoted(api, "r", revisions=2)
        assert (await api.call("POST", f"{BASE}/r/rollback")).status == 200
        assert len(deploy.submitted) == 2
        submitted = deploy.submitted[-1]
        assert submitted["metadata"]["annotations"]["plnt.work/rollback-to"] == "1"
        assert submitted["spec"]["workflow"]["digest"] == digest(1)


async def test_abort_answers_success_when_a_deploy_is_in_flight(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        assert (await api.call("POST", BASE, body=workflowrun("a"))).status == 201
        reply = await api.call("POST", f"{BASE}/a/abort")
        assert reply.status == 200, reply.text
        assert reply.json["kind"] == "Status"
        assert reply.json["status"] == "Success"
        assert reply.json["message"] == "deploy of generation 1 aborted"
        assert [o["metadata"]["name"] for o in deploy.aborted] == ["a"]

        deploy.in_flight = False
        idle = await api.call("POST", f"{BASE}/a/abort")
        assert idle.status == 409
        assert "no deploy is in flight" in idle.json["message"]

        deploy.unavailable = True
        down = await api.call("POST", f"{BASE}/a/abort")
        assert down.status == 503
        missing = await api.call("POST", f"{BASE}/nope/abort")
        assert missing.status == 404


async def test_abort_is_503_on_a_server_without_sagas(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("a"))).status == 201
    reply = await api.call("POST", f"{BASE}/a/abort")
    assert reply.status == 503
    assert reply.json["reason"] == "ServiceUnavailable"


async def test_runtime_subresources_refuse_other_verbs(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("a"))).status == 201
    assert (await api.call("GET", f"{BASE}/a/rollback")).status == 405
    assert (await api.call("GET", f"{BASE}/a/invoke")).status == 405
    assert (await api.call("POST", f"{BASE}/a/invocations")).status == 405
