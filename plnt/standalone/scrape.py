"""What a Prometheus needs to scrape `plnt up`: file SD files, a client certificate, one line.

`STATE/prometheus/` holds Prometheus `file_sd_configs` files: `plnt.json` names the API
server (whose /metrics also carries the in-process deploy worker's), written at every
start; the local target writes one `run-*.json` per run as runners come and go
(`plnt.sagas.targets.local_scrape`). One scrape job reads them all through the glob
`STATE/prometheus/*.json`; each target group says its own `job` and, for the API server,
`__scheme__: https`.

The API server's /metrics needs credentials, as kube-apiserver's does. Prometheus gets
its own client certificate, `STATE/pki/prometheus.crt` (user `plnt-prometheus` in group
`system:monitoring`, which the default policy lets read /metrics and the health paths,
kube's `system:monitoring` role), so no admin key goes into a Prometheus configuration.
The runners' /metrics are plain HTTP on loopback; the job's TLS settings do not apply
to them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from plnt.apiserver import authz, pki
from plnt.sagas.targets import local_scrape

APISERVER_JOB = "plnt-apiserver"
SERVER_FILE = "plnt.json"
MONITORING_USER = "plnt-prometheus"
MONITORING_GROUP = authz.MONITORING_GROUP
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def targets_dir(state_dir: Path) -> Path:
    """`STATE/prometheus`, the directory of every SD file."""
    return local_scrape.targets_dir(state_dir)


def client_certificate(paths: pki.Pki) -> tuple[Path, Path]:
    """Prometheus's client certificate and key under the PKI directory (issued once)."""
    cert, key = paths.directory / "prometheus.crt", paths.directory / "prometheus.key"
    if not (cert.exists() and key.exists()):
        ca = pki.CertificateAuthority.load(paths.ca_cert, paths.ca_key)
        cert_pem, key_pem = pki.issue_client_certificate(
            ca, common_name=MONITORING_USER, organizations=[MONITORING_GROUP]
        )
        _write(key, key_pem, mode=0o600)
        _write(cert, cert_pem, mode=0o644)
    return cert, key


def write_server_targets(state_dir: Path, *, host: str, port: int) -> Path:
    """Write `plnt.json`: the API server (and the deploy worker inside it) as an HTTPS target."""
    address = "127.0.0.1" if host in _WILDCARDS else host
    if ":" in address:
        address = f"[{address}]"
    groups = [
        {
            "targets": [f"{address}:{port}"],
            "labels": {"job": APISERVER_JOB, "__scheme__": "https"},
        }
    ]
    path = targets_dir(state_dir) / SERVER_FILE
    _write(path, (json.dumps(groups, indent=2) + "\n").encode(), mode=0o644)
    return path


def scrape_config(state_dir: Path, paths: pki.Pki, *, interval: str = "15s") -> str:
    """The one-line Prometheus `scrape_configs` entry that scrapes everything plnt up runs."""
    cert, key = client_certificate(paths)
    job = {
        "job_name": "plnt",
        "scrape_interval": interval,
        "file_sd_configs": [{"files": [str(targets_dir(state_dir) / "*.json")]}],
        "tls_config": {
            "ca_file": str(paths.ca_cert),
            "cert_file": str(cert),
            "key_file": str(key),
        },
    }
    # JSON is YAML: one line that pastes under scrape_configs as `- {...}`.
    return json.dumps(job, separators=(", ", ": "))


def _write(path: Path, data: bytes, *, mode: int) -> None:
    """Through a temporary sibling and a rename: Prometheus never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    temporary.replace(path)
