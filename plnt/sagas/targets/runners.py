"""What one revision of a WorkflowRun needs to run, in the two forms the targets take.

`Revision` is the one description of a revision's runners: the run's identity, the
pinned workflow (reference, digest and the exact spec bytes), the backend, replicas,
step cache, GPU class, image and resources. The local target starts runner processes
from it (and ignores what only a cluster has: GPU class, image, resources). The
Kubernetes target installs one Helm release of `charts/workflow-runner` per revision,
named `Revision.release_name()`, with `Revision.to_values()` as its values.

`Values` is that chart's values as a pydantic model; the chart's `values.schema.json` is
`values_schema()`, generated from it, and `values.yaml` holds the model's defaults. The
chart tests fail when either drifts; regenerate the schema with
`python -m plnt.sagas.targets.runners > charts/workflow-runner/values.schema.json`.

The spec reaches the pods as a ConfigMap holding the pinned bytes (see docs/targets.md):
the saga has already pulled and verified them, and the runner reads a file. `Values`
refuses a spec whose sha256 is not its digest.

No I/O here, except printing the schema when run as a module. Errors:
`pydantic.ValidationError` from `to_values()`, naming each bad value by its path.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from plnt.api.workflowruns import StepCacheSpec
from plnt.sagas.values import RunRef
from plnt.workflowspec import bundles, documents

# The chart's objects, the Helm release that holds them and its history all carry the
# spec; Helm keeps a release (gzipped) in one Secret of at most 1 MiB.
MAX_SPEC_BYTES = 256 * 1024
# Helm release names are at most 53 characters; objects are named after the release.
MAX_RELEASE_NAME = 53
API_KEY_ENV = "PLNT_BACKEND_API_KEY"
"""The variable the chart sets from the backend's Secret key; the runner reads the key there."""
FALLBACK_API_KEY_ENV = "PLNT_FALLBACK_API_KEY"
"""The variable the chart sets from the fallback backend's Secret key."""

_LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_QUANTITY = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"

BackendType = Literal["echo", "openai", "vllm", "ollama"]
Quantity = int | Annotated[str, Field(pattern=_QUANTITY)]


# --- the revision, as the saga describes it -------------------------------------------


@dataclass(frozen=True)
class SecretKeyRef:
    """One key of a Secret (a PlntBackend's `credentialsRef`); the target finds its value."""

    name: str
    key: str


@dataclass(frozen=True)
class BackendConfig:
    """The resolved inference backend, as the runner's backend config takes it.

    `api_key_env` is standalone only (a variable the local runner inherits from the
    worker); on a cluster the key comes from `credentials`.
    """

    name: str | None = None
    type: str = "echo"
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    latency_ms: float | None = None
    credentials: SecretKeyRef | None = None
    max_concurrency: int | None = None
    """Calls each replica sends the backend at once: the PlntBackend's
    `capacity.maxConcurrency` (None: no limit). Not divided by the replicas, so scaling
    never changes a replica's configuration (which would restart it)."""
    fallback: BackendConfig | None = None
    """The run's `spec.fallback`, resolved: the runner's backend config `fallback`, which
    serves the calls this backend sheds or refuses with an open breaker."""
    spill: tuple[BackendConfig, ...] = ()
    """The run's pool's other backends a call may spill to (`plnt.runner.spilling`); the
    local target passes them, the chart's values do not yet."""


@dataclass(frozen=True)
class CacheConfig:
    """The runner's step cache settings (spec.cache); `of()` fills in the API's defaults."""

    enabled: bool
    ttl_seconds: float
    max_entries: int

    @classmethod
    def of(cls, spec: StepCacheSpec | None = None) -> CacheConfig:
        spec = spec if spec is not None else StepCacheSpec()
        return cls(spec.enabled, float(spec.ttl_seconds), spec.max_entries)


# --- the chart's values -----------------------------------------------------------------


class _ValuesModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Image(_ValuesModel):
    """The plnt image; its entrypoint is `plnt`, so the chart passes `runner ...`."""

    repository: str = Field(default="ghcr.io/plnt-work/plnt", min_length=1)
    tag: str = Field(default="", description="Empty: the chart's appVersion.")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Resources(_ValuesModel):
    """A container's requests and limits (Kubernetes quantities)."""

    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)


class RunValues(_ValuesModel):
    """The WorkflowRun the release belongs to (labels and annotations only)."""

    namespace: str = Field(min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253, pattern=_DNS_SUBDOMAIN)
    uid: str = Field(min_length=1, max_length=63, pattern=_LABEL_VALUE)


class WorkflowValues(_ValuesModel):
    """The pinned workflow; `spec` is exactly the bytes whose sha256 is `digest`, or the
    bundle of those bytes with the sub-workflows they call (`plnt.workflowspec.bundles`)."""

    ref: str = Field(min_length=1, description="The reference the spec was pulled from.")
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    spec: str = Field(min_length=1, max_length=MAX_SPEC_BYTES, description="UTF-8 spec text.")

    @pydantic.model_validator(mode="after")
    def _spec_is_the_digest(self) -> WorkflowValues:
        try:
            actual = bundles.top_digest(self.spec.encode())
        except documents.SpecError as error:
            raise ValueError(f"spec is not a valid bundle: {error}") from error
        if actual != self.digest:
            raise ValueError(f"spec has digest {actual}, not {self.digest}")
        return self


class Credentials(_ValuesModel):
    """The Secret key holding the backend's API key; the chart passes it as an env var."""

    secret_name: str = Field(default="", description="Empty: the backend takes no key.")
    key: str = Field(default="token", min_length=1, pattern=r"^[-._a-zA-Z0-9]+$")


class FallbackValues(_ValuesModel):
    """The backend serving what the primary sheds or refuses with an open breaker (the
    runner's backend config `fallback`); an empty `type`: none."""

    type: BackendType | Literal[""] = ""
    name: str = Field(default="", description="Its PlntBackend's name, for errors and metrics.")
    endpoint: str = Field(default="", description="Required unless type is echo.")
    model: str = ""
    max_concurrency: int = Field(default=0, ge=0, description="0: no admission limit.")
    credentials: Credentials = Field(default_factory=Credentials)

    @pydantic.model_validator(mode="after")
    def _endpoint_for_remote_backends(self) -> FallbackValues:
        if self.type not in ("", "echo") and not self.endpoint:
            raise ValueError(f"fallback backend type {self.type!r} needs an endpoint")
        return self


class BackendValues(_ValuesModel):
    """The runner's backend flags (`--backend-type`, `--endpoint`, `--model` ...), and its
    backend config file's name, limit and fallback (`--backend-config`, in the ConfigMap)."""

    type: BackendType = "echo"
    endpoint: str = Field(default="", description="Required unless type is echo.")
    model: str = ""
    latency_ms: float = Field(default=0.0, ge=0, description="Echo only: delay per call.")
    credentials: Credentials = Field(default_factory=Credentials)
    name: str = Field(default="", description="Its PlntBackend's name, for errors and metrics.")
    max_concurrency: int = Field(
        default=0,
        ge=0,
        description="Calls each replica sends the backend at once (the PlntBackend's "
        "capacity.maxConcurrency); 0: no admission limit.",
    )
    fallback: FallbackValues = Field(default_factory=FallbackValues)

    @pydantic.model_validator(mode="after")
    def _endpoint_for_remote_backends(self) -> BackendValues:
        if self.type != "echo" and not self.endpoint:
            raise ValueError(f"backend type {self.type!r} needs an endpoint")
        return self


class GpuClass(_ValuesModel):
    """Where pods of one GPU class run and what they ask for; chosen by `gpuClass`."""

    resources: Resources = Field(default_factory=Resources)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)


class ServiceValues(_ValuesModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    port: int = Field(default=80, ge=1, le=65535)


class IngressValues(_ValuesModel):
    enabled: bool = False
    class_name: str = ""
    host: str = Field(default="", description="Required when enabled.")
    path: str = Field(default="/", pattern=r"^/")
    path_type: Literal["Prefix", "Exact", "ImplementationSpecific"] = "Prefix"
    tls_secret_name: str = Field(default="", description="Empty: no TLS.")
    annotations: dict[str, str] = Field(default_factory=dict)


class AutoscalingValues(_ValuesModel):
    """An HPA from `replicas` (its minimum) to `maxReplicas`, on CPU or in-flight requests."""

    enabled: bool = False
    max_replicas: int = Field(default=10, ge=1)
    metric: Literal["cpu", "inFlight"] = "cpu"
    target_cpu_utilization_percentage: int = Field(default=80, ge=1)
    # A Pods metric, served to the HPA by an adapter (e.g. prometheus-adapter) from the
    # runner's `plnt_runner_in_flight` gauge.
    in_flight_metric: str = Field(default="plnt_runner_in_flight", min_length=1)
    target_in_flight_per_pod: Quantity = 4


class PodDisruptionBudgetValues(_ValuesModel):
    enabled: bool = True
    max_unavailable: int = Field(default=1, ge=1)


class ServiceMonitorValues(_ValuesModel):
    enabled: bool = False
    interval: str = Field(default="30s", pattern=r"^[0-9]+(ms|s|m|h)$")
    labels: dict[str, str] = Field(default_factory=dict)


class MetricsValues(_ValuesModel):
    """`/metrics`: prometheus.io scrape annotations on pods, or a ServiceMonitor."""

    scrape_annotations: bool = True
    service_monitor: ServiceMonitorValues = Field(default_factory=ServiceMonitorValues)


class Values(_ValuesModel):
    """The values of charts/workflow-runner: one release per revision."""

    model_config = ConfigDict(title="Values of the workflow-runner chart")

    run: RunValues
    revision: int = Field(ge=0)
    workflow: WorkflowValues
    backend: BackendValues = Field(default_factory=BackendValues)
    replicas: int = Field(default=1, ge=0)
    cache: StepCacheSpec = Field(default_factory=StepCacheSpec)
    gpu_class: str = Field(default="", description="A key of gpuClasses; empty: no GPU.")
    gpu_classes: dict[str, GpuClass] = Field(default_factory=dict)
    image: Image = Field(default_factory=Image)
    image_pull_secrets: list[str] = Field(default_factory=list)
    fullname_override: str = Field(default="", max_length=MAX_RELEASE_NAME)
    port: int = Field(default=8080, ge=1, le=65535, description="The runner's port.")
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "512Mi"}
        )
    )
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    service: ServiceValues = Field(default_factory=ServiceValues)
    ingress: IngressValues = Field(default_factory=IngressValues)
    autoscaling: AutoscalingValues = Field(default_factory=AutoscalingValues)
    pod_disruption_budget: PodDisruptionBudgetValues = Field(
        default_factory=PodDisruptionBudgetValues
    )
    metrics: MetricsValues = Field(default_factory=MetricsValues)

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Values:
        if self.gpu_class and self.gpu_class not in self.gpu_classes:
            raise ValueError(f"gpuClass {self.gpu_class!r} is not one of gpuClasses")
        if self.ingress.enabled and not self.ingress.host:
            raise ValueError("ingress.host is required when ingress is enabled")
        if self.autoscaling.enabled and self.autoscaling.max_replicas < self.replicas:
            raise ValueError("autoscaling.maxReplicas is below replicas")
        return self


def values_schema() -> dict[str, Any]:
    """The chart's values.schema.json: `Values`' JSON schema, with every reference inlined.

    Inlined so that Helm's error for a bad value names the value's own path.
    """
    schema = Values.model_json_schema(by_alias=True)
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **inline(schema)}


# --- the revision, and how it renders ---------------------------------------------------


def release_name(run: RunRef, revision: int) -> str:
    """`<run>-r<revision>`, made a valid release and Service name when it is not one.

    A name that must change (too long, dots, a leading digit) keeps a hash of the
    original, so two runs never share a release.
    """
    wanted = f"{run.name}-r{revision}"
    safe = re.sub(r"[^a-z0-9-]", "-", wanted)
    if not safe[0].isalpha():
        safe = f"w-{safe}"
    if safe == wanted and len(safe) <= MAX_RELEASE_NAME:
        return safe
    tail = f"-{hashlib.sha256(wanted.encode()).hexdigest()[:8]}-r{revision}"
    head = safe.removesuffix(f"-r{revision}")[: MAX_RELEASE_NAME - len(tail)]
    return head.rstrip("-") + tail


@dataclass(frozen=True)
class Revision:
    """Everything needed to run one revision of a run.

    `gpu_class`, `image` and `resources` matter on a cluster only; None takes the chart's
    (or the target's) defaults. `spec` is what every runner of the revision reads: the
    pinned spec's bytes, or their bundle with the sub-workflows they call (one mechanism
    for every target, `plnt.workflowspec.bundles`).
    """

    run: RunRef
    revision: int
    digest: str
    spec: bytes
    backend: BackendConfig = field(default_factory=BackendConfig)
    replicas: int = 1
    cache: CacheConfig = field(default_factory=CacheConfig.of)
    ref: str = ""
    gpu_class: str | None = None
    image: Image | None = None
    resources: Resources | None = None

    def release_name(self) -> str:
        """`<run>-r<revision>`, made a valid release and Service name (see `release_name`)."""
        return release_name(self.run, self.revision)

    def to_values(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """The chart's values for this revision, over the target's `settings`.

        `settings` are chart values every revision shares (gpuClasses, ingress,
        autoscaling, metrics ...); the revision's own keys replace theirs. Raises
        `ValueError` (a `pydantic.ValidationError` names each bad value's path).
        """
        backend = self.backend
        try:
            spec = self.spec.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"workflow spec {self.digest} is not UTF-8 text") from error
        own: dict[str, Any] = {
            "run": {"namespace": self.run.namespace, "name": self.run.name, "uid": self.run.uid},
            "revision": self.revision,
            "workflow": {"ref": self.ref or self.digest, "digest": self.digest, "spec": spec},
            "backend": {
                **_backend_values(backend),
                "latencyMs": backend.latency_ms or 0.0,
                "fallback": {} if backend.fallback is None else _backend_values(backend.fallback),
            },
            "replicas": self.replicas,
            "cache": {
                "enabled": self.cache.enabled,
                "ttlSeconds": int(self.cache.ttl_seconds),
                "maxEntries": self.cache.max_entries,
            },
        }
        if self.gpu_class is not None:
            own["gpuClass"] = self.gpu_class
        if self.image is not None:
            own["image"] = self.image
        if self.resources is not None:
            own["resources"] = self.resources
        values = Values.model_validate({**(settings or {}), **own})
        return values.model_dump(mode="json", by_alias=True)


def _backend_values(backend: BackendConfig) -> dict[str, Any]:
    """What the chart's values say of a backend and of its fallback alike."""
    credentials = backend.credentials
    return {
        "type": backend.type,
        "name": backend.name or "",
        "endpoint": backend.endpoint or "",
        "model": backend.model or "",
        "maxConcurrency": backend.max_concurrency or 0,
        "credentials": {}
        if credentials is None
        else {"secretName": credentials.name, "key": credentials.key},
    }


if __name__ == "__main__":
    print(json.dumps(values_schema(), indent=2))
