"""Every write path that reaches a WorkflowRun's saga answers with the deploy warning when
Temporal is down: the warning comes back in the write's result, whichever handler wrote.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.api_server import BASE, serving, workflowrun
from tests.support.promotions import promoted
from tests.support.recording_deploy import RecordingDeploy

MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
DEPLOY_WARNING = "the deploy will start when Temporal is reachable"


async def test_post_put_patch_apply_scale_rollback_delete_and_deletecollection_carry_it(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    deploy.unavailable = True
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        replies = {"POST": await api.call("POST", BASE, body=workflowrun("w"))}
        current = (await api.call("GET", f"{BASE}/w")).json
        current["spec"]["replicas"] = 2
        replies["PUT"] = await api.call("PUT", f"{BASE}/w", body=current)
        replies["PATCH"] = await api.call(
            "PATCH", f"{BASE}/w", body={"spec": {"replicas": 3}}, headers=MERGE
        )
        replies["apply"] = await api.call(
            "PATCH",
            f"{BASE}/w",
            body=workflowrun("w", replicas=4),
            headers=APPLY,
            params={"fieldManager": "t", "force": "true"},
        )
        replies["scale"] = await api.call(
            "PATCH", f"{BASE}/w/scale", body={"spec": {"replicas": 5}}, headers=MERGE
        )
        await promoted(api, "r", revisions=2)
        replies["rollback"] = await api.call("POST", f"{BASE}/r/rollback")
        replies["DELETE"] = await api.call("DELETE", f"{BASE}/w")
        replies["deletecollection"] = await api.call("DELETE", BASE)

        for path, reply in replies.items():
            assert reply.status in (200, 201), (path, reply.text)
            warnings = reply.headers.getall("Warning", [])
            deploy_warnings = [w for w in warnings if DEPLOY_WARNING in w]
            assert deploy_warnings, (path, warnings)
            assert all(w.startswith('299 plnt "') for w in deploy_warnings), (path, warnings)

        quiet = await api.call(
            "PATCH", f"{BASE}/r", body={"metadata": {"labels": {"a": "b"}}}, headers=MERGE
        )
        assert quiet.status == 200
        assert "Warning" not in quiet.headers
