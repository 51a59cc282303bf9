"""Deploy hooks: which WorkflowRun writes reach the saga, warnings when it is down, retries,
start-up convergence, and the teardown finalizer.

`RecordingDeploy` is an in-memory `DeployControl`: it stands in for the Temporal saga
service (which these API-machinery tests do not run) and records what it is asked.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.recording_deploy import RecordingDeploy

MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_hooks_submit_on_create_spec_change_scale_and_deletion_but_not_status_or_labels(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        created = await api.call("POST", BASE, body=workflowrun("a"))
        assert created.status == 201
        assert deploy.names() == ["a"]
        assert deploy.submitted[0]["metadata"]["generation"] == 1

        status = await api.call(
            "PATCH", f"{BASE}/a/status", body={"status": {"phase": "Pulling"}}, headers=MERGE
        )
        assert status.status == 200
        labels = await api.call(
            "PATCH", f"{BASE}/a", body={"metadata": {"labels": {"team": "x"}}}, headers=MERGE
        )
        assert labels.status == 200
        dry = await api.call(
            "PATCH",
            f"{BASE}/a",
            body={"spec": {"replicas": 4}},
            headers=MERGE,
            params={"dryRun": "All"},
        )
        assert dry.status == 200
        dry_create = await api.call("POST", BASE, body=workflowrun("dry"), params={"dryRun": "All"})
        assert dry_create.status == 201
        assert deploy.names() == ["a"]

        spec = await api.call("PATCH", f"{BASE}/a", body={"spec": {"replicas": 2}}, headers=MERGE)
        assert spec.status == 200
        assert deploy.submitted[-1]["metadata"]["generation"] == 2
        scaled = await api.call(
            "PATCH", f"{BASE}/a/scale", body={"spec": {"replicas": 3}}, headers=MERGE
        )
        assert scaled.status == 200
        assert [o["spec"]["replicas"] for o in deploy.submitted] == [1, 2, 3]

        first_delete = await api.call("DELETE", f"{BASE}/a")
        assert first_delete.status == 200
        assert deploy.submitted[-1]["metadata"]["deletionTimestamp"]
        again = await api.call("DELETE", f"{BASE}/a")
        assert again.status == 200
        assert len(deploy.submitted) == 4


async def test_server_side_apply_and_put_submit_only_when_the_generation_changes(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    apply = {"Content-Type": "application/apply-patch+yaml"}
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        body = workflowrun("b")
        created = await api.call(
            "PATCH", f"{BASE}/b", body=body, headers=apply, params={"fieldManager": "t"}
        )
        assert created.status == 201
        same = await api.call(
            "PATCH", f"{BASE}/b", body=body, headers=apply, params={"fieldManager": "t"}
        )
        assert same.status == 200
        assert len(deploy.submitted) == 1
        current = same.json
        current["spec"]["replicas"] = 5
        put = await api.call("PUT", f"{BASE}/b", body=current)
        assert put.status == 200
        assert [o["spec"]["replicas"] for o in deploy.submitted] == [1, 5]


async def test_new_runs_get_the_teardown_finalizer_only_on_a_server_with_sagas(
    etcd_endpoint: str, tmp_path: Path, api: Api
) -> None:
    plain = await api.call("POST", BASE, body=workflowrun("plain"))
    assert "finalizers" not in plain.json["metadata"]
    async with serving(etcd_endpoint, tmp_path / "s", deploy=RecordingDeploy()) as hooked:
        created = await hooked.call("POST", BASE, body=workflowrun("c"))
        assert created.json["metadata"]["finalizers"] == ["plnt.work/teardown"]
        deleting = await hooked.call("DELETE", f"{BASE}/c")
        assert deleting.json["metadata"]["deletionTimestamp"]
        still = await hooked.call("GET", f"{BASE}/c")
        assert still.status == 200


async def test_a_write_is_stored_with_a_warning_when_temporal_is_down_and_retried_later(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    deploy.unavailable = True
    async with serving(etcd_endpoint, tmp_path, deploy=deploy) as api:
        created = await api.call("POST", BASE, body=workflowrun("d"))
        assert created.status == 201
        warnings = created.headers.getall("Warning")
        assert len(warnings) == 1
        assert warnings[0].startswith('299 plnt "')
        assert "the deploy will start when Temporal is reachable" in warnings[0]
        assert (await api.call("GET", f"{BASE}/d")).status == 200
        edited = await api.call("PATCH", f"{BASE}/d", body={"spec": {"replicas": 2}}, headers=MERGE)
        assert "Temporal is reachable" in edited.headers["Warning"]

        deploy.unavailable = False
        await deploy.wait_for_submits(1)
        # The retry sends the latest stored object, not the one of the failed write.
        assert deploy.submitted[0]["metadata"]["generation"] == 2
        later = await api.call("PATCH", f"{BASE}/d", body={"spec": {"replicas": 3}}, headers=MERGE)
        assert "Warning" not in later.headers


async def test_start_up_resubmits_runs_whose_status_lags_their_generation(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    prefix = f"/t-{uuid.uuid4().hex[:12]}"
    async with serving(
        etcd_endpoint, tmp_path, deploy=RecordingDeploy(), etcd_prefix=prefix
    ) as api:
        for name in ("seen", "unseen", "leaving"):
            assert (await api.call("POST", BASE, body=workflowrun(name))).status == 201
        observed = await api.call(
            "PATCH",
            f"{BASE}/seen/status",
            body={"status": {"observedGeneration": 1, "phase": "Ready"}},
            headers=MERGE,
        )
        assert observed.status == 200
        await api.call(
            "PATCH",
            f"{BASE}/leaving/status",
            body={"status": {"observedGeneration": 1}},
            headers=MERGE,
        )
        assert (await api.call("DELETE", f"{BASE}/leaving")).status == 200

    restarted = RecordingDeploy()
    async with serving(etcd_endpoint, tmp_path, deploy=restarted, etcd_prefix=prefix):
        await restarted.wait_for_submits(2)
        assert sorted(restarted.names()) == ["leaving", "unseen"]
