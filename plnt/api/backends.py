"""PlntBackend (plnt.work/v1): an inference backend registered once, referenced by many runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plnt.api import names
from plnt.api.base import WireModel
from plnt.api.breakers import BackendBreaker
from plnt.api.meta import Condition, ObjectMeta
from plnt.api.slo import BackendPricing

KIND = names.BACKEND_KIND


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
    pool: str | None = Field(
        default=None,
        description="Pool the backend belongs to; a run that asks for a pool "
        "(spec.backend.pool) is placed only on backends of that pool.",
    )
    capacity: BackendCapacity | None = Field(default=None, description="Capacity limits.")
    credentials_ref: SecretKeyReference | None = Field(
        default=None, description="Where the API key is kept."
    )
    metrics_endpoint: str | None = Field(
        default=None,
        description="URL of a Prometheus metrics endpoint beside the backend (e.g. a DCGM "
        "exporter, http://gpu-node:9400/metrics): the prober reads GPU utilisation and "
        "framebuffer use there for status.gpuHeadroom.",
    )
    pricing: BackendPricing | None = Field(
        default=None,
        description="What the backend costs (per million input and output tokens, or per "
        "hour): the cost so far in a run's status.slo and its costPerMillionTokens objective.",
    )


class PlntBackendStatus(WireModel):
    """Observed state of a PlntBackend, written by the prober (null: not known)."""

    reachable: bool | None = Field(
        default=None, description="Whether the API answered the last probe (GET /models)."
    )
    latency_milliseconds: int | None = Field(
        default=None, description="How long the last reachability probe took."
    )
    queue_depth: int | None = Field(
        default=None, description="Requests waiting, as the backend last reported (vllm)."
    )
    in_flight: int | None = Field(
        default=None, description="Requests running, as the backend last reported (vllm)."
    )
    gpu_headroom: int | None = Field(
        default=None,
        description="GPUs with room: below 90% utilisation and 90% framebuffer use (see "
        "docs/sagas.md); 0 when the vLLM KV cache is 90% full; null when nothing says.",
    )
    kv_cache_usage: float | None = Field(
        default=None, description="vLLM's KV-cache usage (0..1), the fullest model's."
    )
    loaded_models: list[str] | None = Field(
        default=None, description="Models loaded in memory (ollama's GET /api/ps)."
    )
    probe_error: str | None = Field(
        default=None,
        description="What the last probe's first failing request said (the reachability "
        "check, then the type's load endpoint, then spec.metricsEndpoint); null when every "
        "request answered.",
    )
    time_to_first_token_milliseconds: int | None = Field(
        default=None,
        description="Time to the first token of the last probe's small streamed chat "
        "completion (null when the backend serves no model to ask, or it failed).",
    )
    last_probe_time: str | None = Field(default=None, description="When the last probe ran.")
    breaker: BackendBreaker | None = Field(
        default=None,
        description="The circuit breakers of the runners calling it, aggregated (null: no "
        "runner calls it); BreakerOpened and BreakerClosed Events mark the changes.",
    )
    conditions: list[Condition] | None = Field(
        default=None, description="Probed: True (Fresh) or False (Stale, with the age)."
    )


class PlntBackend(WireModel):
    """An inference backend: type, endpoint, models, capacity."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["PlntBackend"] = "PlntBackend"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PlntBackendSpec
    status: PlntBackendStatus | None = None
