"""PlntBackend (plnt.work/v1): an inference backend registered once, referenced by many runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plnt.api.base import WireModel
from plnt.api.meta import Condition, ObjectMeta

KIND = "PlntBackend"


class SecretKeyReference(WireModel):
    """A credential by reference: never inline in the object."""

    name: str = Field(description="Name of the Secret (or file in standalone mode).")
    key: str = Field(default="token", description="Key within it.")


class BackendCapacity(WireModel):
    """What placement may use of this backend."""

    max_concurrency: int = Field(default=16, ge=1, description="Requests in flight at most.")
    gpus: int = Field(default=0, ge=0, description="GPUs behind the backend.")


class PlntBackendSpec(WireModel):
    """Desired state of a PlntBackend."""

    type: Literal["openai", "vllm", "ollama", "echo"] = Field(
        description="Protocol family; all but echo speak the OpenAI chat completions API."
    )
    endpoint: str | None = Field(
        default=None, description="Base URL of the OpenAI-compatible API (unused for echo)."
    )
    models: list[str] = Field(default_factory=list, description="Models the backend serves.")
    gpu_class: str | None = Field(default=None, description="GPU class, e.g. a100, l4, cpu.")
    pool: str | None = Field(default=None, description="Pool name for grouping.")
    capacity: BackendCapacity | None = Field(default=None, description="Capacity limits.")
    credentials_ref: SecretKeyReference | None = Field(
        default=None, description="Where the API key is kept."
    )


class PlntBackendStatus(WireModel):
    """Observed state of a PlntBackend, written by the prober."""

    reachable: bool | None = None
    queue_depth: int | None = None
    in_flight: int | None = None
    gpu_headroom: int | None = None
    last_probe_time: str | None = None
    conditions: list[Condition] | None = None


class PlntBackend(WireModel):
    """An inference backend: type, endpoint, models, capacity."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["PlntBackend"] = "PlntBackend"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PlntBackendSpec
    status: PlntBackendStatus | None = None
