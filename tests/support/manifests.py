"""WorkflowRun and PlntBackend manifests as YAML, and `kubectl apply` of them.

What a user would write and apply: the deploy, UI, model and reliability tests all
create their objects this way, through the real kubectl.
"""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from tests.support.plnt_server import Kubectl


def apply(kubectl: Kubectl, namespace: str, manifest: str) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -n NAMESPACE -f -` of a manifest (one or more YAML documents)."""
    return kubectl.run("apply", "-n", namespace, "-f", "-", input=manifest)


def workflowrun(name: str, ref: str, digest: str, **spec: Any) -> str:
    """A WorkflowRun manifest (YAML) pinning `ref` at `digest`, with more `spec` fields."""
    body: dict[str, Any] = {"workflow": {"ref": ref, "digest": digest}, **spec}
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": body,
        }
    )


def backend_manifest(name: str, backend_type: str, *, endpoint: str | None, **extra: Any) -> str:
    """A PlntBackend manifest (YAML); `labels` goes to metadata, other fields to spec."""
    spec: dict[str, Any] = {"type": backend_type, **extra}
    if endpoint is not None:
        spec["endpoint"] = endpoint
    labels = spec.pop("labels", {})
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "PlntBackend",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
    )
