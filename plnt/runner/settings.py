"""What a runner is started with: a spec file, a backend configuration and limits.

`BackendConfig` is a small pydantic model so the same configuration can come from a JSON or
YAML file (`--backend-config FILE`) or from CLI flags, and be checked the same way. The API
key is never part of a spec: it comes from the environment variable named by `apiKeyEnv`,
from the file named by `apiKeyFile` (a mounted Secret key, or the standalone secret file
the local target points at, so the key itself never passes through a config or a workflow
history), or from the config file's `apiKey`, in that order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

BackendType = Literal["echo", "openai", "vllm", "ollama"]


class BackendConfigError(Exception):
    """The backend configuration is missing, unreadable or invalid."""


class BackendConfig(BaseModel):
    """Which inference backend model steps talk to."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    type: BackendType = Field(default="echo", description="echo, or an OpenAI-compatible API.")
    endpoint: str | None = Field(
        default=None, description="Base URL of the OpenAI-compatible API, e.g. http://h:8000/v1."
    )
    model: str | None = Field(default=None, description="Model used when a step names none.")
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the API key."
    )
    api_key_file: str | None = Field(
        default=None, description="File holding the API key (trailing newline ignored)."
    )
    api_key: str | None = Field(default=None, description="The API key itself (prefer the env).")
    latency_ms: float = Field(default=0.0, ge=0, description="Echo only: delay per call.")
    timeout_seconds: float = Field(
        default=300.0, gt=0, description="Upper bound on one backend request."
    )
    name: str | None = Field(
        default=None, description="The backend's name (its PlntBackend), for errors and metrics."
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Calls this runner sends the backend at once (the PlntBackend's "
        "capacity.maxConcurrency, not divided by the replicas); unset: no admission limit.",
    )
    max_queue: int | None = Field(
        default=None,
        ge=0,
        description="Calls that may wait for a slot (default: eight times maxConcurrency).",
    )
    max_queue_seconds: float | None = Field(
        default=None,
        gt=0,
        description="The longest a call waits in the queue for a slot; unset: the call's "
        "deadline alone bounds the wait.",
    )
    retry_budget_ratio: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Retries of backend calls allowed, as a share of the calls over 10 s.",
    )
    retry_budget_floor: int = Field(
        default=3, ge=0, description="Retries allowed per 10 s window whatever the traffic."
    )
    breaker_failures: int = Field(
        default=5, ge=1, description="Consecutive failures that open the circuit breaker."
    )
    breaker_latency_seconds: float | None = Field(
        default=None, gt=0, description="A call slower than this counts as a failure."
    )
    breaker_open_seconds: float = Field(
        default=5.0, gt=0, description="How long an open breaker waits before a probe call."
    )
    fallback: BackendConfig | None = Field(
        default=None,
        description="The backend that serves while this one sheds or its breaker is open.",
    )
    spillover: dict[str, BackendConfig] = Field(
        default_factory=dict,
        description="The run's pool's other backends, by name: a call the API server spills "
        "(X-Plnt-Spill-To NAME) is served by the one it names (plnt.runner.spilling).",
    )

    @pydantic.model_validator(mode="after")
    def _endpoint_for_remote_backends(self) -> BackendConfig:
        if self.type != "echo" and not self.endpoint:
            raise ValueError(f"backend type {self.type!r} needs an endpoint")
        if self.fallback is not None and self.fallback.fallback is not None:
            raise ValueError("fallback.fallback: a fallback backend has no fallback of its own")
        for name, spill in self.spillover.items():
            if spill.spillover:
                raise ValueError(f"spillover.{name}.spillover: a spill backend spills no further")
        return self

    def resolved_api_key(self) -> str | None:
        """The API key: from `apiKeyEnv` when set and present, else `apiKeyFile`, else `apiKey`.

        Raises BackendConfigError naming the file when `apiKeyFile` cannot be read: a
        runner started without the key it was promised would fail every model step.
        """
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if value:
                return value
        if self.api_key_file:
            try:
                return Path(self.api_key_file).read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as error:
                problem = error.strerror or str(error)
                raise BackendConfigError(f"apiKeyFile {self.api_key_file}: {problem}") from error
            except UnicodeDecodeError as error:
                message = f"apiKeyFile {self.api_key_file}: not UTF-8 text"
                raise BackendConfigError(message) from error
        return self.api_key

    def identity(self) -> str:
        """What distinguishes this backend in cache keys (never the key itself)."""
        return f"{self.type}:{self.endpoint or ''}"

    def display_name(self) -> str:
        """The name errors and metrics use: `name`, else the identity."""
        return self.name or self.identity()


def load_backend_config(path: str | Path) -> BackendConfig:
    """Read a backend configuration from a JSON or YAML file."""
    try:
        document = yaml.safe_load(Path(path).read_bytes())
    except (OSError, yaml.YAMLError) as error:
        raise BackendConfigError(f"cannot read backend config {path}: {error}") from error
    try:
        return BackendConfig.model_validate(document or {})
    except pydantic.ValidationError as error:
        raise BackendConfigError(f"invalid backend config {path}: {error}") from error


@dataclass(frozen=True)
class RunnerSettings:
    """Everything `build_app` needs; built by `python -m plnt.runner` or `plnt runner`."""

    spec_path: Path
    backend: BackendConfig
    host: str = "127.0.0.1"
    port: int = 8080
    cache_max_entries: int = 1024
    cache_ttl_seconds: float = 600.0
    max_body_bytes: int = 1024 * 1024
