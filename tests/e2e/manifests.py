"""Objects the kubectl end-to-end tests apply, and applying them with the real kubectl.

Each test works in its own namespace, so the names here never collide across tests.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.support.plnt_server import Kubectl

DIGEST = "sha256:" + "ef" * 32
REF = "oci://127.0.0.1:5000/wf/audit:1"


def run_manifest(name: str, namespace: str, *, replicas: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name, **labels}},
        "spec": {
            "workflow": {"ref": REF, "digest": DIGEST},
            "backend": {"name": "echo"},
            "replicas": replicas,
        },
    }


def backend_manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "echo", "models": ["tiny"], "gpuClass": "cpu"},
    }


def apply(kubectl: Kubectl, tmp_path: Path, *objects: dict[str, Any]) -> None:
    path = tmp_path / f"objects-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    kubectl.run("apply", "-f", str(path))
