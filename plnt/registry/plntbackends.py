"""PlntBackend: definition, strategy and printer columns."""

from __future__ import annotations

from plnt.api import errors
from plnt.api.backends import KIND, PlntBackend
from plnt.api.workflowruns import GROUP, VERSION
from plnt.registry.definitions import Object, PrinterColumn, ResourceDefinition, Subresource, lookup
from plnt.registry.labelnames import config_key_errors, dns1123_subdomain_errors, go_quote
from plnt.registry.strategy import Strategy


class PlntBackendStrategy(Strategy):
    """Rules of PlntBackend beyond its schema."""

    def validate_semantics(self, obj: Object) -> list[errors.Cause]:
        causes: list[errors.Cause] = []
        spec = obj.get("spec")
        if (
            isinstance(spec, dict)
            and spec.get("type") not in (None, "echo")
            and not spec.get("endpoint")
        ):
            causes.append(
                errors.Cause(
                    "FieldValueRequired",
                    f"Required value: an endpoint is required for type {spec.get('type')}",
                    "spec.endpoint",
                )
            )
        causes.extend(_credentials_causes(lookup(obj, "spec", "credentialsRef")))
        return causes


def _credentials_causes(ref: object) -> list[errors.Cause]:
    """The Secret's name and key must be what kube accepts: they also name files standalone."""
    if not isinstance(ref, dict):
        return []
    causes = []
    checks = (("name", dns1123_subdomain_errors), ("key", config_key_errors))
    for field, check in checks:
        value = ref.get(field)
        if not isinstance(value, str):
            continue
        for problem in check(value):
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(value)}: {problem}",
                    f"spec.credentialsRef.{field}",
                )
            )
    return causes


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
            "In-Flight",
            "integer",
            "Requests running, as last probed.",
            lambda o: lookup(o, "status", "inFlight"),
            priority=1,
        ),
        PrinterColumn(
            "Queue",
            "integer",
            "Requests waiting, as last probed.",
            lambda o: lookup(o, "status", "queueDepth"),
            priority=1,
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
