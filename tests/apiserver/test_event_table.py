"""Events as `kubectl get events` prints them: the server's Table has kube's own Event
columns (wide ones at priority 1) and rows about the involved object.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.api_server import BASE, Api, workflowrun
from tests.support.waiting import eventually

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def create(api: Api, name: str) -> dict[str, Any]:
    reply = await api.call("POST", BASE, body=workflowrun(name))
    assert reply.status == 201, reply.text
    return dict(reply.json)


async def test_event_tables_use_kubes_event_columns(api: Api) -> None:
    obj = await create(api, "evt")
    path = "/api/v1/namespaces/default/events"

    async def recorded() -> dict[str, Any] | None:
        # The recorder writes Events off the request path, a moment after the create.
        table: dict[str, Any] = (await api.call("GET", path, headers={"Accept": TABLE})).json
        return table if table["rows"] else None

    table = await eventually(recorded, within=10, what="the Accepted event of evt")
    columns = [(c["name"], c["priority"], c["format"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Last Seen", 0, ""),
        ("Type", 0, ""),
        ("Reason", 0, ""),
        ("Object", 0, ""),
        ("Subobject", 1, ""),
        ("Source", 1, ""),
        ("Message", 0, ""),
        ("First Seen", 1, ""),
        ("Count", 1, ""),
        ("Name", 1, "name"),
    ]
    cells = table["rows"][0]["cells"]
    assert cells[1:4] == ["Normal", "Accepted", "workflowrun/evt"]
    assert cells[5] == "plnt" and cells[8] == 1
    assert cells[9].startswith("evt.") and re.fullmatch(r"\d+s", cells[0])
    assert table["rows"][0]["object"]["metadata"]["namespace"] == "default"
    assert obj["metadata"]["uid"]
