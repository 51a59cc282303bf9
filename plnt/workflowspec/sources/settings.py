"""Settings of the sources: limits, retries and credentials, as frozen dataclasses.

Credentials are read from the environment only by the `from_env` constructors, which the CLI
calls; library code receives settings explicitly, so tests never depend on the caller's shell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """How much, how long, and how often: applied by every source.

    `max_bytes` bounds the spec (and each manifest/index); anything larger is refused from
    its announced size where the store gives one, and otherwise after reading one byte more
    than the limit. `timeout` is per network request (connect and each read). Only transient
    failures (connection errors, timeouts, 429 and 5xx answers) are retried, `attempts` times
    in total, with exponential backoff starting at `backoff` seconds.
    """

    max_bytes: int = MIB
    max_manifest_bytes: int = 256 * 1024
    timeout: float = 10.0
    attempts: int = 3
    backoff: float = 0.25
    max_backoff: float = 4.0


@dataclass(frozen=True)
class RegistrySettings:
    """How to reach OCI distribution registries.

    `plain_http=None` means: plain HTTP for loopback hosts (localhost, 127.0.0.0/8, ::1) and
    HTTPS everywhere else, as container tooling does. `tls_verify` may be a CA bundle path.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    plain_http: bool | None = None
    tls_verify: bool | str = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RegistrySettings:
        """Read `PLNT_REGISTRY_USERNAME` / `PLNT_REGISTRY_PASSWORD`."""
        env = os.environ if environ is None else environ
        return cls(
            username=env.get("PLNT_REGISTRY_USERNAME") or None,
            password=env.get("PLNT_REGISTRY_PASSWORD") or None,
        )


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3 or an S3-compatible store.

    Unset fields fall back to botocore's standard chain (AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL,
    ~/.aws/config and ~/.aws/credentials, instance metadata).
    """

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    path_style: bool | None = None


@dataclass(frozen=True)
class SourceSettings:
    """Everything a source needs; the defaults suit a local OCI layout."""

    limits: Limits = field(default_factory=Limits)
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    s3: S3Settings = field(default_factory=S3Settings)
