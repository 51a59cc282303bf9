"""What one accepted write asks of the saga, parsed once into the API's own types.

The `desire` signal carries `values.Desired`, whose `spec` is the WorkflowRun's spec
exactly as the API stored it (the history keeps the API's JSON, so recorded sagas
replay whatever the Python types become). The workflow turns it into an `Intent` on
arrival: the spec as `plnt.api.workflowruns.WorkflowRunSpec`, so every default (canary
weight, analysis requests, cache settings, replicas) comes from the API model and
none is restated here. Workflow code: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from plnt.api.evaluations import CanaryEvaluation
from plnt.api.workflowruns import CanaryAnalysis, CanarySpec, WorkflowRunSpec
from plnt.sagas import values as v

REVISION_FIELDS = ("workflow", "backend", "gpuClass", "target", "cache")
"""The spec fields that make a new revision; replicas and canary settings do not."""


def fingerprint(spec: dict[str, Any]) -> str:
    """What makes a new revision, from the spec as stored (kept in `Deployment.fingerprint`).

    Computed from the stored JSON, not the parsed model, so a fingerprint saved by an
    earlier version of the saga still compares equal for the same spec.
    """
    relevant = {key: spec.get(key) for key in REVISION_FIELDS}
    return json.dumps(relevant, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Intent:
    """One generation's desired state: the signal as sent, and its spec typed."""

    desired: v.Desired
    spec: WorkflowRunSpec
    fingerprint: str

    @classmethod
    def of(cls, desired: v.Desired) -> Intent:
        return cls(desired, WorkflowRunSpec.model_validate(desired.spec), fingerprint(desired.spec))

    @property
    def generation(self) -> int:
        return self.desired.generation

    @property
    def deleting(self) -> bool:
        return self.desired.deleting

    @property
    def rollback_to(self) -> int | None:
        return self.desired.rollback_to

    @property
    def canary(self) -> CanarySpec:
        return self.spec.canary or CanarySpec()

    @property
    def analysis(self) -> CanaryAnalysis | None:
        return self.canary.analysis

    @property
    def evaluation(self) -> CanaryEvaluation | None:
        return self.canary.evaluation

    @property
    def evaluation_json(self) -> dict[str, Any]:
        """`spec.canary.evaluation` as stored (the activity reads it with the API's model)."""
        canary = self.desired.spec.get("canary") or {}
        return dict(canary.get("evaluation") or {})

    @property
    def shadow_json(self) -> dict[str, Any] | None:
        """`spec.canary.shadow` as stored; None when unset."""
        shadow = (self.desired.spec.get("canary") or {}).get("shadow")
        return dict(shadow) if isinstance(shadow, dict) else None

    @property
    def smoke_input(self) -> dict[str, Any] | None:
        """The run's smoke inputs; None (not `{}`) when it sets none, so the spec's are used."""
        smoke = self.canary.smoke
        return smoke.input if smoke is not None and "input" in smoke.model_fields_set else None

    @property
    def smoke_expect(self) -> dict[str, Any] | None:
        smoke = self.canary.smoke
        return smoke.expect if smoke is not None else None

    @property
    def cache(self) -> dict[str, Any]:
        """`spec.cache` as stored (the install activity reads it with the API's model)."""
        return dict(self.desired.spec.get("cache") or {})

    @property
    def route(self) -> dict[str, Any] | None:
        """`spec.route` as stored (the target reads it with the API's model); None: unset."""
        route = self.desired.spec.get("route")
        return dict(route) if isinstance(route, dict) else None

    def resolve_request(self, namespace: str) -> v.ResolveRequest:
        backend = self.spec.backend
        selector = backend.selector if backend is not None else None
        slo = self.spec.slo
        first_token = slo.time_to_first_token if slo is not None else None
        return v.ResolveRequest(
            namespace=namespace,
            name=backend.name if backend is not None else None,
            selector=selector.to_wire() if selector is not None else None,
            model=backend.model if backend is not None else None,
            gpu_class=self.spec.gpu_class,
            pool=backend.pool if backend is not None else None,
            ttft_objective_ms=first_token.milliseconds if first_token is not None else None,
            fallback=self.spec.fallback.name if self.spec.fallback is not None else None,
            fallback_model=self.spec.fallback.model if self.spec.fallback is not None else None,
        )

    def positional_resolve_args(self, namespace: str) -> list[Any]:
        """The positional arguments the `resolve` activity took before `ResolveRequest`."""
        return [namespace, self.desired.spec.get("backend") or {}, self.spec.gpu_class]
