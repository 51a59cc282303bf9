"""Validation against the real Kubernetes OpenAPI schemas shipped by `kubernetes-validate`.

Every object the stand-in accepts or stores is checked against the *strict* schema of
its kind (unknown fields are errors) for `KUBERNETES_VERSION`, so the stand-in is never
laxer than a cluster; Gateway API kinds (HTTPRoute) against the Gateway API's own
schemas instead (`gateways`). `kubernetes_validate.validate` stops at the first error; here the
same schema files are loaded through the package and every error is reported, each as a
metav1 StatusCause (`FieldValueInvalid`, `FieldValueRequired`, or `FieldValueTypeInvalid`
... worded after the JSON-schema error). Schema checks do not replace kube's own
validation functions: callers add those (see `events.py`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import referencing
from kubernetes_validate import utils as kv_utils

from tests.support.kube import gateways, statuses

KUBERNETES_VERSION = "1.37"


class SchemaMissing(Exception):
    """kubernetes-validate ships no schema for this kind and apiVersion."""


def _schema_version() -> str:
    versions = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= KUBERNETES_VERSION]
    if not versions:
        raise SchemaMissing(f"no schemas for Kubernetes {KUBERNETES_VERSION}")
    return versions[-1]


@functools.cache
def _validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator:
    version = _schema_version()
    prefix = f"kubernetes-json-schema/v{version}-local-strict"
    group_version = api_version  # core: "v1"; named groups: "<first label>-<version>"
    if "/" in api_version:
        group, _, ver = api_version.partition("/")
        group_version = f"{group.split('.', 1)[0]}-{ver}"
    try:
        schema = kv_utils.schema_contents(f"{prefix}/{kind.lower()}-{group_version}.json", version)
    except FileNotFoundError as error:
        raise SchemaMissing(f"no schema for {kind} {api_version}") from error
    definitions = kv_utils.schema_contents(f"{prefix}/_definitions.json", version)
    registry: referencing.Registry[Any] = referencing.Registry()
    registry = referencing.Resource.from_contents(schema) @ registry
    registry = referencing.Resource.from_contents(definitions) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate(obj: Mapping[str, Any]) -> list[statuses.Cause]:
    """Every schema error of `obj` (by its own kind and apiVersion) as StatusCauses.

    Gateway API kinds are checked against the Gateway API's own schemas (`gateways`).
    """
    if gateways.owns(str(obj.get("apiVersion", ""))):
        return gateways.validate(obj)
    validator = _validator(str(obj.get("kind", "")), str(obj.get("apiVersion", "")))
    causes = []
    for error in sorted(validator.iter_errors(dict(obj)), key=lambda e: list(e.absolute_path)):
        causes.extend(_causes(error))
    return causes


def check(obj: Mapping[str, Any]) -> None:
    """Raise the 422 a cluster would give when `obj` breaks its schema."""
    causes = validate(obj)
    if causes:
        kind, api_version = str(obj.get("kind", "")), str(obj.get("apiVersion", ""))
        group = api_version.rpartition("/")[0]
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise statuses.invalid(kind, group, name, causes)


def _causes(error: jsonschema.ValidationError) -> list[statuses.Cause]:
    path = _field_path(error.absolute_path)
    if error.validator == "additionalProperties":
        extras = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return [
            statuses.Cause(
                "FieldValueInvalid", f'unknown field "{_join(path, key)}"', _join(path, key)
            )
            for key in extras
        ]
    if error.validator == "required":
        missing = str(error.message).split("'")[1] if "'" in str(error.message) else ""
        return [statuses.field_required(_join(path, missing))]
    if error.validator == "type":
        return [
            statuses.Cause(
                "FieldValueTypeInvalid",
                f"Invalid value: {json.dumps(error.instance)}: {error.message}",
                path,
            )
        ]
    return [statuses.field_invalid(path, error.instance, str(error.message))]


def _field_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
