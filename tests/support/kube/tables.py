"""Server-side printing (meta.k8s.io/v1 Table) for `kubectl get` on the stand-in's kinds.

Events get kube's columns (Last Seen, Type, Reason, Object, Message, from
`pkg/printers/internalversion`); other kinds get the generic Name / Created At table
kube gives kinds without a printer. Rows carry PartialObjectMetadata, kube's default
`includeObject=Metadata`. No I/O here.
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.support.kube import kinds

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    for entry in accept.split(","):
        params = {
            p.split("=")[0].strip(): p.partition("=")[2].strip() for p in entry.split(";")[1:]
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
    return False


def _column(name: str, kind: str = "string", fmt: str = "", priority: int = 0) -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = int((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _event_cells(obj: Obj) -> list[Any]:
    series = obj.get("series") or {}
    last = (
        series.get("lastObservedTime")
        or obj.get("lastTimestamp")
        or obj.get("deprecatedLastTimestamp")
        or obj.get("eventTime")
    )
    regarding = obj.get("involvedObject") or obj.get("regarding") or {}
    target = f"{str(regarding.get('kind', '')).lower()}/{regarding.get('name', '')}"
    return [
        _age(last),
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        obj.get("message") or obj.get("note", ""),
    ]


def table(view: kinds.View, items: list[Obj], revision: str) -> Obj:
    if view.storage == "events":
        columns = [
            _column("Last Seen"),
            _column("Type"),
            _column("Reason"),
            _column("Object"),
            _column("Message"),
        ]
        cells = [_event_cells(item) for item in items]
    else:
        columns = [_column("Name", fmt="name"), _column("Created At", "date")]
        cells = [[i["metadata"]["name"], i["metadata"].get("creationTimestamp")] for i in items]
    rows = [
        {
            "cells": row,
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item["metadata"],
            },
        }
        for row, item in zip(cells, items, strict=True)
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision},
        "columnDefinitions": columns,
        "rows": rows,
    }
