"""The saga's part in serving, played by tests: `status.traffic` written through the status
subresource of a run on the in-process API server (`tests/support/api_server.py`).

`target` is one traffic entry (revision, weight, endpoints), `shadowed` a canary entry
that only shadows; `run_with_traffic` creates the run and publishes its traffic as the
saga would, and `invoke` calls the run through the API server.
"""

from __future__ import annotations

from typing import Any

from tests.support.api_server import BASE, Api, workflowrun

MERGE = {"Content-Type": "application/merge-patch+json"}
DIGEST = "sha256:" + "ab" * 32


def target(revision: int, weight: int, *endpoints: str) -> dict[str, Any]:
    return {"revision": revision, "digest": DIGEST, "weight": weight, "endpoints": list(endpoints)}


async def run_with_traffic(api: Api, name: str, *targets: dict[str, Any]) -> None:
    """Create the run and publish `targets` as its traffic, as the saga would."""
    assert (await api.call("POST", BASE, body=workflowrun(name))).status == 201
    reply = await api.call(
        "PATCH",
        f"{BASE}/{name}/status",
        body={"status": {"revision": targets[-1]["revision"], "traffic": list(targets)}},
        headers=MERGE,
    )
    assert reply.status == 200, reply.text


async def invoke(api: Api, name: str, question: str = "q?") -> Any:
    return await api.call("POST", f"{BASE}/{name}/invoke", body={"inputs": {"question": question}})


def shadowed(revision: int, *endpoints: str, percent: int = 100, queue: int = 64) -> dict[str, Any]:
    entry = target(revision, 0, *endpoints)
    entry["shadow"] = {"percent": percent, "queueSize": queue, "since": "2024-01-01T00:00:00Z"}
    return entry
