"""PlntClient against a real plnt API server over TLS: objects, subresources, typed errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TypeVar

import pytest

from plnt.client import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    PlntClient,
    ServerError,
    TransportError,
    Unauthorized,
    kubeconfig,
)
from tests.client.conftest import (
    ADMIN_TOKEN,
    NOBODY_TOKEN,
    Server,
    ready_status,
    workflowrun,
    write_kubeconfig,
)
from tests.support.waiting import eventually

T = TypeVar("T")


async def test_created_objects_can_be_read_listed_and_applied_again(client: PlntClient) -> None:
    created = await client.create_workflowrun(workflowrun("a"))
    assert created["metadata"]["namespace"] == client.namespace
    await client.apply_workflowrun(workflowrun("b", replicas=2))
    applied = await client.apply_workflowrun(workflowrun("b", replicas=3))
    assert applied["spec"]["replicas"] == 3
    assert applied["metadata"]["generation"] == 2
    assert (await client.get_workflowrun("a"))["metadata"]["name"] == "a"
    names = [run["metadata"]["name"] for run in await client.list_workflowruns()]
    assert names == ["a", "b"]


async def test_lists_follow_continue_tokens(
    client: PlntClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("plnt.client.clients.LIST_CHUNK", 2)
    for index in range(5):
        await client.create_workflowrun(workflowrun(f"r{index}"))
    assert len(await client.list_workflowruns()) == 5


async def test_missing_objects_raise_not_found_with_the_servers_message(
    client: PlntClient,
) -> None:
    with pytest.raises(NotFound) as caught:
        await client.get_workflowrun("ghost")
    assert caught.value.code == 404
    assert caught.value.message == 'workflowruns.plnt.work "ghost" not found'


async def test_a_second_create_raises_already_exists_which_is_a_conflict(
    client: PlntClient,
) -> None:
    await client.create_workflowrun(workflowrun("twice"))
    with pytest.raises(AlreadyExists) as caught:
        await client.create_workflowrun(workflowrun("twice"))
    assert isinstance(caught.value, Conflict)
    assert caught.value.reason == "AlreadyExists"


async def test_invalid_objects_raise_invalid_with_every_field_cause(client: PlntClient) -> None:
    body = workflowrun("bad", replicas=-1)
    body["spec"]["workflow"]["digest"] = "nope"
    with pytest.raises(Invalid) as caught:
        await client.create_workflowrun(body)
    fields = {cause.field for cause in caught.value.causes}
    assert {"spec.replicas", "spec.workflow.digest"} <= fields


async def test_status_is_merge_patched_through_the_status_subresource(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("s"))
    await client.patch_workflowrun_status("s", {"status": {"phase": "Pulling", "revision": 1}})
    patched = await client.patch_workflowrun_status("s", {"status": {"phase": "Ready"}})
    assert patched["status"] == {"phase": "Ready", "revision": 1}


async def test_scale_sets_the_desired_replicas(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("sc"))
    scale = await client.scale_workflowrun("sc", 4)
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 4)
    assert (await client.get_workflowrun("sc"))["spec"]["replicas"] == 4
    assert (await client.get_scale("sc"))["spec"]["replicas"] == 4


async def test_a_watch_on_one_object_sees_its_status_change(client: PlntClient) -> None:
    created = await client.create_workflowrun(workflowrun("w"))
    await client.create_workflowrun(workflowrun("other"))
    rv = created["metadata"]["resourceVersion"]
    await client.patch_workflowrun_status("other", {"status": {"phase": "Pulling"}})
    await client.patch_workflowrun_status("w", {"status": {"phase": "Pulling"}})
    async with asyncio.timeout(20):
        async for event in client.watch_workflowrun("w", resource_version=rv, timeout_seconds=10):
            if event.type == "BOOKMARK":
                continue
            assert event.object["metadata"]["name"] == "w"
            assert (event.type, event.object["status"]["phase"]) == ("MODIFIED", "Pulling")
            break


async def test_events_for_an_object_include_its_acceptance(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("ev"))
    await client.create_workflowrun(workflowrun("ev2"))

    async def reasons() -> list[str]:
        return [e["reason"] for e in await client.events_for("ev")]

    assert await eventually(reasons, within=20.0, what="the Accepted event") == ["Accepted"]


async def test_one_client_serves_many_concurrent_requests(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("c"))
    answers = await asyncio.gather(*(client.get_workflowrun("c") for _ in range(25)))
    assert {a["metadata"]["uid"] for a in answers} == {answers[0]["metadata"]["uid"]}


async def test_plnt_backends_can_be_listed(client: PlntClient) -> None:
    assert await client.list_backends() == []


async def test_invoke_reaches_the_promoted_runner_and_reports_revision_cache_and_timing(
    client: PlntClient, runner_url: str
) -> None:
    await client.create_workflowrun(workflowrun("inv"))
    await client.patch_workflowrun_status("inv", ready_status(runner_url))
    result = await client.invoke("inv", {"question": "hello"})
    assert result.revision == "1"
    assert result.cache in ("hit", "miss", "partial", "off")
    assert "apiserver" in [hop.name for hop in result.timings]
    assert "hello" in str(result.output)
    listed = await client.invocation_log("inv")
    assert len(listed["items"]) == 1


async def test_invoke_without_a_ready_revision_is_a_server_error(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("cold"))
    with pytest.raises(ServerError, match="no ready revision") as caught:
        await client.invoke("cold", {"question": "hi"})
    assert caught.value.code == 503


async def test_rollback_to_a_revision_in_history_rewrites_the_spec(client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("rb"))
    old = "sha256:" + "ab" * 32
    status = ready_status("http://127.0.0.1:1", revision=2)
    status["status"]["history"].insert(
        0, {"revision": 1, "digest": old, "ref": "oci://r.example/wf:0", "reason": "deploy"}
    )
    await client.patch_workflowrun_status("rb", status)
    with pytest.raises(Invalid, match="9"):
        await client.rollback("rb", to_revision=9)
    rolled = await client.rollback("rb", to_revision=1)
    assert rolled["spec"]["workflow"] == {"ref": "oci://r.example/wf:0", "digest": old}


async def test_rollback_and_invocations_of_missing_runs_raise_not_found(
    client: PlntClient,
) -> None:
    with pytest.raises(NotFound):
        await client.rollback("ghost")
    with pytest.raises(NotFound):
        await client.invocation_log("ghost")


async def test_abort_and_promote_on_a_server_without_sagas_are_server_errors_saying_so(
    client: PlntClient,
) -> None:
    await client.create_workflowrun(workflowrun("ab"))
    with pytest.raises(ServerError, match="there is no deploy to abort") as caught:
        await client.abort("ab")
    assert caught.value.code == 503
    with pytest.raises(ServerError, match="there is no deploy to promote") as caught:
        await client.promote("ab")
    assert caught.value.code == 503


async def test_files_beside_the_kubeconfig_work_as_well_as_inline_data(
    server: Server, tmp_path: Path
) -> None:
    path = write_kubeconfig(tmp_path / "k" / "config", server, inline=False)
    async with PlntClient(kubeconfig.load(path, namespace="files")) as plnt:
        assert await plnt.list_workflowruns() == []


async def test_tokens_authenticate_and_are_authorized_like_any_user(
    server: Server, tmp_path: Path
) -> None:
    admin = write_kubeconfig(tmp_path / "a", server, token=ADMIN_TOKEN)
    nobody = write_kubeconfig(tmp_path / "n", server, token=NOBODY_TOKEN)
    wrong = write_kubeconfig(tmp_path / "w", server, token="wrong")
    async with PlntClient(kubeconfig.load(admin)) as plnt:
        assert await plnt.list_workflowruns() == []
    async with PlntClient(kubeconfig.load(nobody)) as plnt:
        with pytest.raises(Forbidden, match='User "nobody" cannot list'):
            await plnt.list_workflowruns()
    async with PlntClient(kubeconfig.load(wrong)) as plnt:
        with pytest.raises(Unauthorized):
            await plnt.list_workflowruns()


async def test_an_unknown_server_certificate_is_a_transport_error_unless_told_to_skip(
    server: Server, tmp_path: Path
) -> None:
    path = write_kubeconfig(tmp_path / "config", server)
    connection = kubeconfig.load(path)
    untrusted = kubeconfig.Connection(
        server=connection.server,
        client_certificate_data=connection.client_certificate_data,
        client_key_data=connection.client_key_data,
    )
    async with PlntClient(untrusted) as plnt:
        with pytest.raises(TransportError, match="certificate"):
            await plnt.list_workflowruns()
    skipping = kubeconfig.Connection(
        server=connection.server,
        insecure_skip_tls_verify=True,
        client_certificate_data=connection.client_certificate_data,
        client_key_data=connection.client_key_data,
    )
    async with PlntClient(skipping) as plnt:
        assert await plnt.list_workflowruns() == []


async def test_a_closed_port_is_a_transport_error(tmp_path: Path) -> None:
    from plnt.processes.ports import free_port

    connection = kubeconfig.Connection(server=f"https://127.0.0.1:{free_port()}")
    async with PlntClient(connection, timeout=5) as plnt:
        with pytest.raises(TransportError):
            await plnt.get_workflowrun("x")
