"""`plnt catalog`'s text: the catalog as a table, one Workflow in full. Pure functions."""

from __future__ import annotations

import json
from typing import Any

from plnt.api import workflows
from plnt.cli import printing


def _errors(items: list[dict[str, Any]]) -> list[str]:
    """Every source error once, then every version that cannot be deployed."""
    lines: list[str] = []
    seen: set[str] = set()
    for obj in items:
        for error in (obj.get("status") or {}).get("sourceErrors") or []:
            line = f"source {error.get('source')}: {error.get('reason')}: {error.get('message')}"
            if line not in seen:
                seen.add(line)
                lines.append(line)
    for obj in items:
        name = (obj.get("metadata") or {}).get("name")
        for error in (obj.get("status") or {}).get("versionErrors") or []:
            lines.append(
                f"{name} {error.get('tag')}: {error.get('reason')}: {error.get('message')}"
            )
    return lines


def list_text(items: list[dict[str, Any]], *, with_namespace: bool = False) -> str:
    """NAME LATEST VERSIONS DIGEST DESCRIPTION, then what could not be read."""
    if not items:
        return "No workflows in the catalog."
    rows = []
    for obj in items:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        labels = list(dict.fromkeys(v.get("version") for v in spec.get("versions") or []))
        newest = workflows.latest(obj)
        row = [
            meta.get("name"),
            spec.get("latestVersion"),
            ",".join(str(v) for v in labels),
            workflows.short_digest(newest.get("digest")) if newest else None,
            spec.get("description"),
        ]
        rows.append([meta.get("namespace"), *row] if with_namespace else row)
    headers = ["Name", "Latest", "Versions", "Digest", "Description"]
    text = printing.columns(["Namespace", *headers] if with_namespace else headers, rows)
    problems = _errors(items)
    if problems:
        text += "\n\nNot listed in full:\n" + "\n".join(f"  {line}" for line in problems)
    refreshed = ((items[0].get("status") or {}).get("lastRefreshTime")) if items else None
    if refreshed:
        text += f"\n\nRefreshed {printing.age(refreshed)} ago."
    return text


def workflow_text(obj: dict[str, Any]) -> str:
    """One Workflow: its description, versions, inputs, steps, backends and errors."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    status = obj.get("status") or {}
    lines = [f"Name:         {meta.get('name')}", f"Namespace:    {meta.get('namespace')}"]
    lines.append(f"Description:  {spec.get('description') or '<none>'}")
    lines.append(f"Latest:       {spec.get('latestVersion') or '<none>'}")
    if status.get("lastRefreshTime"):
        lines.append(f"Refreshed:    {status['lastRefreshTime']}")
    lines += ["", "Versions:"]
    lines += [
        "  " + line
        for line in printing.columns(
            ["Version", "Tag", "Digest", "Valid", "Ref"],
            [
                [v.get("version"), v.get("tag"), v.get("digest"), v.get("valid"), v.get("ref")]
                for v in spec.get("versions") or []
            ],
        ).splitlines()
    ]
    if spec.get("inputs") is not None:
        lines += ["", "Inputs:", "  " + json.dumps(spec["inputs"], sort_keys=True)]
    if spec.get("steps"):
        lines += ["", "Steps:"]
        for step in spec["steps"]:
            needs = f" (needs {', '.join(step['needs'])})" if step.get("needs") else ""
            how = f" {step['mode']}" if step.get("mode") else ""
            lines.append(f"  {step['id']}: {step['kind']}{how}{needs}")
    lines += ["", "Backends:"]
    backends = spec.get("backends") or []
    lines += [
        f"  model ({b.get('mode')}{', model ' + b['model'] if b.get('model') else ''})"
        f" for {', '.join(b.get('steps') or [])}"
        for b in backends
    ] or ["  none (no model steps)"]
    problems = _errors([obj])
    if problems:
        lines += ["", "Errors:", *(f"  {line}" for line in problems)]
    return "\n".join(lines)
