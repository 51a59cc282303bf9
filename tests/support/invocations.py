"""Invocation objects on the in-process API server (`tests/support/api_server.py`).

`invocation(name)` is a valid Invocation body of run `summarize` in `default`, at
`INVOCATIONS`; `set_status` writes its status as a worker would, through the status
subresource.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.api_server import Api

INVOCATIONS = "/apis/plnt.work/v1/namespaces/default/invocations"


def invocation(name: str, run: str = "summarize", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "Invocation",
        "metadata": {"name": name},
        "spec": {"workflowRun": run, "inputs": {"topic": "etcd"}, **spec},
    }


async def set_status(api: Api, name: str, status: dict[str, object]) -> None:
    reply = await api.call(
        "PATCH",
        f"{INVOCATIONS}/{name}/status",
        data=json.dumps({"status": status}).encode(),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert reply.status == 200, reply.text
