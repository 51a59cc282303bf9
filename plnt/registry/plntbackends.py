"""PlntBackend: definition, strategy and printer columns."""

from __future__ import annotations

from plnt.api import errors
from plnt.api.backends import KIND, PlntBackend
from plnt.api.workflowruns import GROUP, VERSION
from plnt.registry.definitions import Object, PrinterColumn, ResourceDefinition, Subresource, lookup
from plnt.registry.strategy import Strategy


class PlntBackendStrategy(Strategy):
    """Rules of PlntBackend beyond its schema."""

    def validate_semantics(self, obj: Object) -> list[errors.Cause]:
        spec = obj.get("spec")
        if (
            isinstance(spec, dict)
            and spec.get("type") not in (None, "echo")
            and not spec.get("endpoint")
        ):
            return [
                errors.Cause(
                    "FieldValueRequired",
                    f"Required value: an endpoint is required for type {spec.get('type')}",
                    "spec.endpoint",
                )
            ]
        return []


DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural="plntbackends",
    singular="plntbackend",
    model=PlntBackend,
    strategy=PlntBackendStrategy(model=PlntBackend),
    short_names=("pb",),
    categories=("plnt",),
    description="An inference backend registered once and referenced by many runs.",
    subresources=(Subresource("status", KIND, ("get", "patch", "update")),),
    columns=(
        PrinterColumn("Type", "string", "Backend protocol.", lambda o: lookup(o, "spec", "type")),
        PrinterColumn("Endpoint", "string", "Base URL.", lambda o: lookup(o, "spec", "endpoint")),
        PrinterColumn(
            "Reachable",
            "string",
            "Result of the last probe.",
            lambda o: (
                None
                if lookup(o, "status", "reachable") is None
                else str(lookup(o, "status", "reachable")).lower()
            ),
        ),
        PrinterColumn(
            "GPU", "string", "GPU class.", lambda o: lookup(o, "spec", "gpuClass"), priority=1
        ),
        PrinterColumn(
            "Models",
            "string",
            "Served models.",
            lambda o: ",".join(lookup(o, "spec", "models") or []) or None,
            priority=1,
        ),
    ),
)
