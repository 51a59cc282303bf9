"""PlntBackend's rules beyond its schema: an endpoint where one is needed, URLs that a
prober can fetch, a valid Secret key.

The credentials reference is held to kube's rules for Secret names and keys because in
standalone mode they also name files (STATE/secrets/NAME/KEY).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from plnt.api import errors
from plnt.registry.labelnames import config_key_errors, dns1123_subdomain_errors, go_quote
from plnt.registry.objects import Object, lookup
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
        causes.extend(_url_causes(lookup(obj, "spec", "metricsEndpoint"), "spec.metricsEndpoint"))
        causes.extend(_credentials_causes(lookup(obj, "spec", "credentialsRef")))
        causes.extend(_pricing_causes(lookup(obj, "spec", "pricing")))
        return causes


def _pricing_causes(pricing: object) -> list[errors.Cause]:
    """Prices per token or per hour, not both and not neither: a cost is counted one way."""
    if not isinstance(pricing, dict):
        return []
    per_token = any(
        pricing.get(name) is not None
        for name in ("inputPerMillionTokens", "outputPerMillionTokens")
    )
    hourly = pricing.get("perHour") is not None
    if per_token and hourly:
        return [
            errors.Cause(
                "FieldValueInvalid",
                "Invalid value: price the backend per million tokens or per hour, not both",
                "spec.pricing.perHour",
            )
        ]
    if not per_token and not hourly:
        return [
            errors.Cause(
                "FieldValueRequired",
                "Required value: one of inputPerMillionTokens, outputPerMillionTokens or perHour",
                "spec.pricing",
            )
        ]
    return []


def _url_causes(value: object, field: str) -> list[errors.Cause]:
    """An absolute http(s) URL with a host, or nothing (the field is optional)."""
    if not isinstance(value, str):
        return []
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a malformed port raises here
    except ValueError:
        valid = False
    if valid:
        return []
    return [
        errors.Cause(
            "FieldValueInvalid",
            f"Invalid value: {go_quote(value)}: must be an http or https URL with a host",
            field,
        )
    ]


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
