"""Hostile request bodies against a real `plnt up` (real etcd): refused cheaply, and never
in the way of other requests.

Deep nesting (JSON or YAML, flow or block) stops at 100 levels with a 400 saying so;
a YAML alias bomb ("billion laughs") is a 400 for excessive aliasing, as go-yaml
words it; a body over 3 MiB is kube's 413. Then twenty bodies that each cost the
server real decoding work are sent at once, and `/readyz` is asked ten times in a
row while they are in flight: those ten answers must come while at most a few of the
hostile bodies have been answered. A server that decoded on its event loop would
answer one hostile body between every two `/readyz` calls. The assertion is about
order, not time.
"""

from __future__ import annotations

import asyncio
import io
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from tests.support.plnt_server import PlntServer

RUNS = "/apis/plnt.work/v1/namespaces/default/workflowruns"
DIGEST = "sha256:" + "ab" * 32
YAML = {"Content-Type": "application/yaml"}
JSON = {"Content-Type": "application/json"}
DEPTH = "exceeded max depth of 100"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    with PlntServer(tmp_path_factory.mktemp("plnt-hostile")) as srv:
        yield srv


@pytest.fixture
async def session(server: PlntServer) -> AsyncIterator[aiohttp.ClientSession]:
    context = ssl.create_default_context(cafile=str(server.pki_dir / "ca.crt"))
    context.load_cert_chain(server.pki_dir / "admin.crt", server.pki_dir / "admin.key")
    connector = aiohttp.TCPConnector(ssl=context, limit=64)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        yield client


async def post(
    session: aiohttp.ClientSession, server: PlntServer, data: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    payload: Any = io.BytesIO(data) if len(data) > 1 << 20 else data
    async with session.post(server.url + RUNS, data=payload, headers=headers) as response:
        text = await response.text()
        return response.status, json.loads(text) if text else None


def workflowrun_yaml(name: str, *, extra: str = "") -> bytes:
    return (
        f"apiVersion: plnt.work/v1\nkind: WorkflowRun\nmetadata:\n  name: {name}\n{extra}"
        f"spec:\n  workflow: {{ref: 'oci://r.example/wf:1', digest: '{DIGEST}'}}\n"
    ).encode()


def nested_json(depth: int) -> bytes:
    body = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": f"deep-{depth}"},
        "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}},
    }
    text = json.dumps(body)
    # An unknown field, dropped under fieldValidation=Ignore: only the nesting is tested.
    return (text[:-1] + ', "extra": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}").encode()


BILLION_LAUGHS = (
    "\n".join(
        ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    )
    + "\n"
).encode()

REFUSED = [
    ("2 KB of YAML flow nesting", b"[" * 2048, YAML, DEPTH),
    ("YAML flow mappings", b"{a: " * 600, YAML, DEPTH),
    ("YAML block mappings", "".join(" " * i + "a:\n" for i in range(150)).encode(), YAML, DEPTH),
    ("YAML block sequences", b"- " * 150 + b"x\n", YAML, DEPTH),
    ("JSON arrays", b"[" * 2048, JSON, DEPTH),
    ("JSON objects", b'{"a":' * 200 + b"1" + b"}" * 200, JSON, DEPTH),
    ("JSON one level too deep", nested_json(101), JSON, DEPTH),
    ("a billion laughs", BILLION_LAUGHS, YAML, "document contains excessive aliasing"),
    ("a recursive alias", b"a: &x [*x]\n", YAML, "recursive alias"),
]


async def test_deep_nesting_and_alias_bombs_are_refused_with_a_400_saying_why(
    server: PlntServer, session: aiohttp.ClientSession
) -> None:
    for what, data, headers, says in REFUSED:
        status, body = await post(session, server, data, headers)
        assert status == 400, (what, status, body)
        assert body["kind"] == "Status" and body["reason"] == "BadRequest", (what, body)
        assert says in body["message"], (what, body["message"])


async def test_nesting_and_aliases_within_the_limits_are_accepted(
    server: PlntServer, session: aiohttp.ClientSession
) -> None:
    url = server.url + RUNS + "?fieldValidation=Ignore"
    async with session.post(url, data=nested_json(100), headers=JSON) as response:
        assert response.status == 201, await response.text()
    anchored = workflowrun_yaml(
        "anchored", extra="  labels: &l {team: a, tier: b}\n  annotations: *l\n"
    )
    status, body = await post(session, server, anchored, YAML)
    assert status == 201, body
    assert body["metadata"]["annotations"] == {"team": "a", "tier": "b"}


async def test_a_body_over_3_mib_is_kubes_413(
    server: PlntServer, session: aiohttp.ClientSession
) -> None:
    big = b'{"kind": "WorkflowRun", "pad": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    status, body = await post(session, server, big, JSON)
    assert status == 413, body
    assert body["message"] == "Request entity too large: limit is 3145728"

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):
            yield b"#" * 65536  # 4 MiB of YAML comment, sent without a Content-Length

    async with session.post(server.url + RUNS, data=chunks(), headers=YAML) as response:
        assert response.status == 413


def slow_hostile_body(index: int) -> bytes:
    """Valid YAML that costs real decoding work before its last line is refused as too deep."""
    annotations = "".join(f"    k{i}: value-{i}\n" for i in range(1200))
    prefix = workflowrun_yaml(f"slow-{index}", extra=f"  annotations:\n{annotations}")
    return prefix + b"status: " + b"[" * 150 + b"\n"


async def test_readyz_is_answered_while_hostile_bodies_are_being_refused(
    server: PlntServer, session: aiohttp.ClientSession
) -> None:
    answered: list[int] = []
    first_answer = asyncio.Event()

    async def hostile(index: int) -> int:
        status, _ = await post(session, server, slow_hostile_body(index), YAML)
        answered.append(index)
        first_answer.set()
        return status

    tasks = [asyncio.create_task(hostile(i)) for i in range(20)]
    try:
        # Wait until the server is busy with them: the first refusal has come back.
        await asyncio.wait_for(first_answer.wait(), timeout=60)
        seen_before = len(answered)
        for _ in range(10):
            async with session.get(server.url + "/readyz") as response:
                assert response.status == 200
                assert await response.text() == "ok"
        seen_after = len(answered)
    finally:
        statuses = await asyncio.gather(*tasks)
    assert statuses == [400] * 20
    assert seen_after < 20, "every hostile body was answered before /readyz could be"
    # Decoded in the way of other requests, the bodies still pending would (nearly) all be
    # answered before ten /readyz calls were; beside them, fewer than half are.
    pending = 20 - seen_before
    assert seen_after - seen_before < pending / 2, (
        f"{seen_after - seen_before} of {pending} pending hostile bodies were answered during"
        " ten /readyz calls: the server decodes them in the way of other requests"
    )
