"""Settings of one API server instance (frozen: built once by the composition root)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's limit; aiohttp's 1 MiB default and plain-text 413 would be wrong."""


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Where to listen, where etcd is, and how to authenticate and authorize."""

    etcd_endpoints: tuple[str, ...] = ("127.0.0.1:2379",)
    etcd_prefix: str = "/registry"
    etcd_ca_file: Path | None = None
    """CA bundle that verifies etcd's serving certificate (TLS to etcd when set)."""
    etcd_cert_file: Path | None = None
    """Client certificate for etcd's `--client-cert-auth` (with `etcd_key_file`)."""
    etcd_key_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = 6443
    pki_dir: Path | None = None
    token_file: Path | None = None
    policy_file: Path | None = None
    requestheader_allowed_names: tuple[str, ...] = ("front-proxy-client",)
    watch_cache: bool = True
    max_request_body_bytes: int = MAX_REQUEST_BODY_BYTES
    invoke_timeout_seconds: float = 300.0
    min_request_timeout_seconds: int = 1800
    bookmark_interval_seconds: float = 60.0
    version: str = "v1.37.0-plnt.1"
    extra_sans: tuple[str, ...] = field(default=())
