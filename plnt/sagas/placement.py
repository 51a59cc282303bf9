"""Choosing a PlntBackend for a run: by name, or by selector and headroom.

Pure functions over PlntBackend objects as the API serves them, so placement can be
tested without a server. Headroom is `capacity.maxConcurrency - status.inFlight -
status.queueDepth` (the load last probed; zero where a backend reports none);
backends whose last probe found them unreachable are never chosen.

Errors: `NoBackend` with a message that says what was asked and what exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class NoBackend(Exception):
    """No PlntBackend satisfies the run's selection."""


def matches_selector(labels: Mapping[str, str], selector: Mapping[str, Any]) -> bool:
    """metav1.LabelSelector semantics: matchLabels and matchExpressions, all must hold."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def headroom(backend: Mapping[str, Any]) -> int:
    """Declared concurrency less what the backend reports running and waiting."""
    spec = backend.get("spec") or {}
    status = backend.get("status") or {}
    capacity = (spec.get("capacity") or {}).get("maxConcurrency", 16)
    busy = int(status.get("inFlight") or 0) + int(status.get("queueDepth") or 0)
    return int(capacity) - busy


def choose(
    backends: Sequence[Mapping[str, Any]],
    *,
    name: str | None,
    selector: Mapping[str, Any] | None,
    gpu_class: str | None,
    model: str | None,
) -> Mapping[str, Any]:
    """The backend the run should use (see the module docstring)."""
    if name:
        for backend in backends:
            if backend.get("metadata", {}).get("name") == name:
                status = backend.get("status") or {}
                if status.get("reachable") is False:
                    probe = status.get("probe") or "the last probe failed"
                    raise NoBackend(f'PlntBackend "{name}" is unreachable: {probe}')
                return backend
        known = sorted(str(b.get("metadata", {}).get("name")) for b in backends)
        raise NoBackend(
            f'PlntBackend "{name}" not found; the namespace has '
            + (", ".join(known) if known else "no PlntBackends")
        )
    candidates = []
    for backend in backends:
        spec = backend.get("spec") or {}
        labels = backend.get("metadata", {}).get("labels") or {}
        if selector is not None and not matches_selector(labels, selector):
            continue
        if gpu_class and spec.get("gpuClass") != gpu_class:
            continue
        if model and spec.get("models") and model not in spec["models"]:
            continue
        if (backend.get("status") or {}).get("reachable") is False:
            continue
        candidates.append(backend)
    if not candidates:
        wanted = [
            part
            for part in (
                f"selector {dict(selector)}" if selector is not None else "",
                f"gpuClass {gpu_class}" if gpu_class else "",
                f"model {model}" if model else "",
            )
            if part
        ]
        what = " and ".join(wanted) or "any PlntBackend"
        raise NoBackend(f"no reachable PlntBackend matches {what} ({len(backends)} exist)")
    candidates.sort(key=lambda b: str(b.get("metadata", {}).get("name")))
    return max(candidates, key=headroom)  # the first of equals: the smallest name
