"""Rendering charts/plnt offline and reading what it renders.

The chart is rendered by the Helm SDK (`helm_python`, Helm 4 through its C library):
no helm binary and no cluster. `lookup` sees nothing offline, so every offline render
generates fresh certificates; `tests/charts/kube_standin.py` covers the upgrade path.

Named values sets are the installations the docs describe; each test module renders
each set once (module-scoped fixtures) because certificate generation dominates the
cost of a render.
"""

from __future__ import annotations

import base64
import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml
from cryptography import x509

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "charts" / "plnt"
RELEASE = "plnt"
NAMESPACE = "plnt-system"
KUBERNETES_VERSION = "1.35.0"

EXTERNAL_ETCD_SERVERS = ["https://etcd-a.db.example:2379", "https://etcd-b.db.example:2379"]

VALUES_SETS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "catalog": {
        "apiserver": {
            "catalog": {
                "sources": [
                    {"source": "oci://registry.example.com/team/summarize"},
                    {"source": "s3://specs/prod/", "namespaces": ["default", "team-a"]},
                ],
                "refreshSeconds": 30,
            }
        }
    },
    "signing": {
        "signing": {
            "signers": [
                {"name": "ci", "secret": "ci-ca", "key": "ca.pem", "identity": "ci@example.com"}
            ],
            "requireIn": ["prod"],
        }
    },
    "ha": {
        "apiserver": {"replicas": 3, "podAntiAffinity": "hard"},
        "etcd": {"replicas": 3},
    },
    "external-etcd": {
        "etcd": {
            "mode": "external",
            "external": {"servers": EXTERNAL_ETCD_SERVERS, "secretName": "etcd-client"},
        }
    },
    "cert-manager": {
        "certManager": {"enabled": True},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "networkPolicy": {"enabled": True},
    },
    "temporal-dev": {
        "temporal": {"devServer": {"enabled": True}, "namespace": "plnt"},
        "networkPolicy": {"enabled": True},
    },
    "temporal-cloud": {
        "temporal": {
            "address": "plnt.a1b2c.tmprl.cloud:7233",
            "namespace": "plnt.a1b2c",
            "tls": {"secretName": "temporal-mtls"},
            "apiKey": {"secretName": "temporal-api-key", "key": "key"},
        },
        "apiserver": {"sagas": False},
    },
}


@dataclass(frozen=True)
class Rendered:
    """The objects one render produced, and its NOTES."""

    objects: list[dict[str, Any]]
    notes: str

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.all(kind) if o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
        return found[0]

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.objects:
            counts[o["kind"]] = counts.get(o["kind"], 0) + 1
        return counts


def parse(manifests: Mapping[str, str]) -> Rendered:
    """Objects of a render (empty documents dropped), NOTES.txt kept apart."""
    objects: list[dict[str, Any]] = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(objects=objects, notes=notes)


def render(chart: helm_python.Chart, values: dict[str, Any] | None) -> Rendered:
    return parse(chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True))


# -- reading objects ------------------------------------------------------------------


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    found = [c for c in containers if c["name"] == name]
    assert len(found) == 1, f"no container {name} in {workload['metadata']['name']}"
    return found[0]


def flags(args: Iterable[str]) -> dict[str, str | None]:
    """`--name=value` and bare `--name` arguments as {name: value or None}."""
    parsed: dict[str, str | None] = {}
    for arg in args:
        assert arg.startswith("--"), f"not a flag: {arg!r}"
        name, sep, value = arg[2:].partition("=")
        assert name not in parsed, f"--{name} given twice"
        parsed[name] = value if sep else None
    return parsed


def mount_of(workload: dict[str, Any], container_name: str, path: str) -> tuple[dict, dict]:
    """The (volumeMount, volume) under which `path` is visible in the container."""
    spec = workload["spec"]["template"]["spec"]
    for mount in container(workload, container_name)["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix):
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            return mount, volume
    raise AssertionError(f"{path} is on no volume of {container_name}")


def secret_bytes(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def certificate(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def dns_names(cert: x509.Certificate) -> list[str]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName)


def covers(cert: x509.Certificate, host: str) -> bool:
    """Whether a DNS SAN of `cert` matches `host` (a leading `*.` matches one label)."""
    for name in dns_names(cert):
        if name.startswith("*."):
            label, _, rest = host.partition(".")
            if label and rest == name[2:]:
                return True
        elif fnmatch.fnmatchcase(host, name):
            return True
    return False


# -- RBAC -----------------------------------------------------------------------------


def rbac_allows(rules: Iterable[dict[str, Any]], *, group: str, resource: str, verb: str) -> bool:
    """RBAC's own matching: group, resource (with `/subresource`) and verb, `*` anywhere."""
    for rule in rules:
        if not {"*", group} & set(rule.get("apiGroups", [])):
            continue
        if not {"*", resource} & set(rule.get("resources", [])):
            continue
        if {"*", verb} & set(rule.get("verbs", [])):
            return True
    return False


READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]


def role(r: Rendered, name: str) -> list[dict[str, Any]]:
    """The rules of the rendered ClusterRole `name`."""
    rules: list[dict[str, Any]] = r.one("ClusterRole", name)["rules"]
    return rules


def aggregated(r: Rendered, to: str) -> list[dict[str, Any]]:
    """The rules of the one rendered ClusterRole that aggregates to the built-in role `to`."""
    label = f"rbac.authorization.k8s.io/aggregate-to-{to}"
    (found,) = [c for c in r.all("ClusterRole") if c["metadata"]["labels"].get(label) == "true"]
    rules: list[dict[str, Any]] = found["rules"]
    return rules


def validate_strictly(objects: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """Validate every object strictly against the Kubernetes schemas (failing the test
    naming the object and field); the (apiVersion, kind) pairs that have no schema."""
    unchecked: set[tuple[str, str]] = set()
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unchecked.add((obj["apiVersion"], obj["kind"]))
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {where}: {exc.message}")
    return unchecked
