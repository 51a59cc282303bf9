"""A PlntBackend as kubectl shows it: its status, and its Events oldest first."""

from __future__ import annotations

from typing import Any

from tests.support.plnt_server import Kubectl


def status_of(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = kubectl.json("get", "-n", namespace, "plntbackend", name)
    return obj.get("status") or {}


def backend_events(kubectl: Kubectl, namespace: str, name: str) -> list[tuple[str, str, int]]:
    """(type, reason, count) of the backend's Events, as `kubectl get events` lists them
    with kube's field selector, oldest first."""
    selector = f"involvedObject.kind=PlntBackend,involvedObject.name={name}"
    listed = kubectl.json("get", "events", "-n", namespace, "--field-selector", selector)
    items = sorted(listed["items"], key=lambda e: e["metadata"]["name"])  # NAME.HEX(UnixNano)
    return [(e["type"], e["reason"], e["count"]) for e in items]
