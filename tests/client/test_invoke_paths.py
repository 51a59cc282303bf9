"""Where PlntClient sends an invocation: through the run's `proxy` subresource, which
kube-apiserver does not cut at its request timeout, else (403) through `…/invoke`.

The server's policy grants `admin` everything and `invoker` only `create` on
`workflowruns/invoke` (no proxy), as a namespace's custom Role could; `nobody` nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plnt.client import Forbidden, NotFound, PlntClient, kubeconfig
from tests.client.conftest import (
    INVOKER_TOKEN,
    NOBODY_TOKEN,
    Server,
    ready_status,
    serving,
    workflowrun,
    write_kubeconfig,
)

POLICY = {
    "rules": [
        {"groups": ["system:masters"], "verbs": ["*"], "resources": ["*"]},
        {"groups": ["system:masters"], "verbs": ["*"], "nonResourcePaths": ["*"]},
        {"users": ["invoker"], "verbs": ["create"], "resources": ["workflowruns/invoke"]},
    ]
}


@pytest.fixture
async def guarded(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Server]:
    async with serving(etcd_endpoint, tmp_path / "server", policy=POLICY) as served:
        yield served


@pytest.fixture
async def admin(guarded: Server, tmp_path: Path, runner_url: str) -> AsyncIterator[PlntClient]:
    """An admin's client, with the run `chat` served by a real runner in namespace `inv`."""
    path = write_kubeconfig(tmp_path / "admin", guarded, namespace="inv")
    async with PlntClient(kubeconfig.load(path)) as client:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "inv"}}
        await client.request("POST", "/api/v1/namespaces", json=namespace)
        await client.create_workflowrun(workflowrun("chat"))
        await client.patch_workflowrun_status("chat", ready_status(runner_url))
        yield client


def token_client(server: Server, tmp_path: Path, token: str) -> PlntClient:
    path = write_kubeconfig(tmp_path / token, server, token=token, namespace="inv")
    return PlntClient(kubeconfig.load(path))


async def streamed(client: PlntClient, question: str, run: str = "chat") -> list[dict[str, Any]]:
    return [line async for line in client.invoke_stream(run, {"question": question})]


async def test_invocations_go_through_the_runs_proxy_and_are_logged_with_its_path(
    admin: PlntClient,
) -> None:
    result = await admin.invoke("chat", {"question": "proxied"})
    assert (result.output, result.revision) == ("proxied", "1")
    assert result.cache in ("hit", "miss", "partial", "off")
    assert [hop.name for hop in result.timings][-1] == "apiserver"
    lines = await streamed(admin, "streamed")
    assert lines[-1]["type"] == "result" and lines[-1]["output"] == "streamed"
    logged = (await admin.invocation_log("chat"))["items"]
    assert [(entry.get("path"), entry["status"]) for entry in logged] == [("/invoke", 200)] * 2


async def test_a_caller_who_may_invoke_but_not_use_the_proxy_is_answered_through_invoke(
    admin: PlntClient, guarded: Server, tmp_path: Path
) -> None:
    async with token_client(guarded, tmp_path, INVOKER_TOKEN) as invoker:
        result = await invoker.invoke("chat", {"question": "direct"})
        lines = await streamed(invoker, "direct stream")
    assert (result.output, result.revision) == ("direct", "1")
    assert lines[-1]["output"] == "direct stream"
    logged = (await admin.invocation_log("chat"))["items"]
    assert [("path" in entry, entry["status"]) for entry in logged] == [(False, 200)] * 2


async def test_a_caller_who_may_do_neither_gets_the_403_of_invoke_as_before(
    admin: PlntClient, guarded: Server, tmp_path: Path
) -> None:
    denied = (
        'workflowruns.plnt.work "chat" is forbidden: User "nobody" cannot create resource '
        '"workflowruns/invoke" in API group "plnt.work" in the namespace "inv"'
    )
    async with token_client(guarded, tmp_path, NOBODY_TOKEN) as nobody:
        with pytest.raises(Forbidden) as plain:
            await nobody.invoke("chat", {"question": "no"})
        with pytest.raises(Forbidden) as stream:
            await streamed(nobody, "no")
    assert plain.value.message == stream.value.message == denied


async def test_errors_on_the_proxy_path_keep_the_servers_message_and_reason(
    admin: PlntClient,
) -> None:
    with pytest.raises(NotFound) as plain:
        await admin.invoke("ghost", {"question": "?"})
    with pytest.raises(NotFound) as stream:
        await streamed(admin, "?", run="ghost")
    for caught in (plain, stream):
        assert caught.value.message == 'workflowruns.plnt.work "ghost" not found'
        assert caught.value.reason == "NotFound"
