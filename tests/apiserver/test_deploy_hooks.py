"""Deploy hooks: which WorkflowRun writes reach the saga, warnings when it is down, retries,
start-up convergence, and the teardown finalizer.

`RecordingDeploy` is an in-memory `DeployControl`: it stands in for the Temporal saga
service (which these API-machinery tests do not run) and records what it is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.sagas.control import DeployUnavailable
from tests.apiserver.conftest import BASE, Api, workflowrun
from tests.support import tls

MERGE = {"Content-Type": "application/merge-patch+json"}
DEADLINE_SECONDS = 20.0


class RecordingDeploy:
    """A DeployControl kept in memory, standing in for Temporal: it records submits and aborts.

    `unavailable` makes every call fail as an unreachable Temporal would; `in_flight`
    is what `abort` answers.
    """

    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.aborted: list[dict[str, Any]] = []
        self.unavailable = False
        self.in_flight = True
        self._changed = asyncio.Condition()

    async def submit(self, obj: dict[str, Any]) -> None:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        async with self._changed:
            self.submitted.append(copy.deepcopy(obj))
            self._changed.notify_all()

    async def abort(self, obj: dict[str, Any]) -> bool:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        self.aborted.append(copy.deepcopy(obj))
        return self.in_flight

    def names(self) -> list[str]:
        return [o["metadata"]["name"] for o in self.submitted]

    async def wait_for_submits(self, count: int) -> None:
        """Wait (with a deadline) until at least `count` submits were recorded."""
        async with asyncio.timeout(DEADLINE_SECONDS), self._changed:
            await self._changed.wait_for(lambda: len(self.submitted) >= count)


@contextlib.asynccontextmanager
async def serving_with_deploy(
    etcd_endpoint: str, tmp_path: Path, deploy: RecordingDeploy, *, prefix: str = ""
) -> AsyncIterator[Api]:
    """The in-process TLS server of `conftest.serving`, built with a DeployControl."""
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=prefix or f"/t-{uuid.uuid4().hex[:12]}",
        pki_dir=tmp_path / "pki",
        bookmark_interval_seconds=0.2,
    )
    application = app_module.build_app(settings, deploy=deploy)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with (
        tls.serve_https(application, tls.server_context(paths)) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Api(url=url, session=session, pki=paths, settings=settings)


async def test_hooks_submit_on_create_spec_change_scale_and_deletion_but_not_status_or_labels(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    deploy = RecordingDeploy()
    async with serving_with_deploy(etcd_endpoint, tmp_path, deploy) as api:
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
    async with serving_with_deploy(etcd_endpoint, tmp_path, deploy) as api:
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
    async with serving_with_deploy(etcd_endpoint, tmp_path / "s", RecordingDeploy()) as hooked:
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
    async with serving_with_deploy(etcd_endpoint, tmp_path, deploy) as api:
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
    async with serving_with_deploy(
        etcd_endpoint, tmp_path, RecordingDeploy(), prefix=prefix
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
    async with serving_with_deploy(etcd_endpoint, tmp_path, restarted, prefix=prefix):
        await restarted.wait_for_submits(2)
        assert sorted(restarted.names()) == ["leaving", "unseen"]
