"""A run with a promotion history on the in-process API server, the saga's part played.

`promoted(api, name, revisions=N)` creates the run at revision N with revisions 1..N in
its history (`record`), each pinned at `digest(n)`: what rollback and abort act on.
"""

from __future__ import annotations

from typing import Any

from tests.support.api_server import BASE, Api, workflowrun

MERGE = {"Content-Type": "application/merge-patch+json"}


def digest(n: int) -> str:
    return "sha256:" + f"{n:x}" * 64


def record(revision: int) -> dict[str, Any]:
    return {
        "revision": revision,
        "digest": digest(revision),
        "ref": f"oci://r.example/wf:{revision}",
        "reason": "deploy",
    }


async def promoted(api: Api, name: str, *, revisions: int) -> dict[str, Any]:
    """A run at revision `revisions` whose history holds revisions 1..N (saga's part played)."""
    body = workflowrun(name)
    body["spec"]["workflow"] = {
        "ref": f"oci://r.example/wf:{revisions}",
        "digest": digest(revisions),
    }
    assert (await api.call("POST", BASE, body=body)).status == 201
    status = {"history": [record(r) for r in range(1, revisions + 1)]}
    if revisions:
        status["revision"] = revisions
    reply = await api.call("PATCH", f"{BASE}/{name}/status", body={"status": status}, headers=MERGE)
    assert reply.status == 200, reply.text
    result: dict[str, Any] = reply.json
    return result
