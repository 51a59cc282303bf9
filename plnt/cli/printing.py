"""Text output shared by the commands: kubectl-style columns, JSON/YAML, ages and durations.

Pure functions from data to strings (no I/O), so every rendering is testable and
the commands stay one call plus one print.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import yaml

OutputFormat = Literal["table", "wide", "json", "yaml", "name"]
GROUP_RESOURCE = "workflowrun.plnt.work"


def columns(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns three spaces apart, headers upper-case, as kubectl prints."""
    cells = [[str(h).upper() for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "<none>"
    return str(value)


def table_text(table: dict[str, Any], *, wide: bool = False, with_namespace: bool = False) -> str:
    """A server-rendered meta.k8s.io Table as kubectl prints it (priority>0 columns if wide)."""
    definitions = table.get("columnDefinitions") or []
    keep = [i for i, d in enumerate(definitions) if wide or not d.get("priority")]
    headers = [definitions[i]["name"] for i in keep]
    rows = []
    for row in table.get("rows") or []:
        cells = row.get("cells") or []
        values = [cells[i] if i < len(cells) else "" for i in keep]
        if with_namespace:
            namespace = ((row.get("object") or {}).get("metadata") or {}).get("namespace", "")
            values.insert(0, namespace)
        rows.append(values)
    if with_namespace:
        headers.insert(0, "Namespace")
    return columns(headers, rows)


def document(value: Any, output: Literal["json", "yaml"]) -> str:
    """`value` as indented JSON or as YAML (block style, keys in server order)."""
    if output == "json":
        return json.dumps(value, indent=4, ensure_ascii=False)
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True).rstrip("\n")


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Several objects as kubectl's `-o json` prints them: a v1 List."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def parse_time(stamp: str | None) -> datetime | None:
    """An RFC 3339 time (`Z` or an offset), or None."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kube's short form: 45s, 3m20s, 5h2m, 3d4h."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds}s" if seconds and minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes and hours < 8 else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours and days < 8 else f"{days}d"


def age(stamp: str | None, *, now: datetime | None = None) -> str:
    """Time since `stamp`, or `<unknown>`."""
    moment = parse_time(stamp)
    if moment is None:
        return "<unknown>"
    return human_duration(((now or datetime.now(UTC)) - moment).total_seconds())


def step_duration(start: str | None, end: str | None) -> str:
    """How long a step took (or has been running, marked with `+`), or empty if not started."""
    begun = parse_time(start)
    if begun is None:
        return ""
    finished = parse_time(end)
    if finished is None:
        return human_duration((datetime.now(UTC) - begun).total_seconds()) + "+"
    return human_duration((finished - begun).total_seconds())


def short_digest(digest: str | None) -> str:
    """`sha256:` and the first 12 hex digits."""
    if not digest:
        return ""
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}:{hexdigits[:12]}" if hexdigits else digest
