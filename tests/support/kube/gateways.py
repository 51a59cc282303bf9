"""Validation of Gateway API objects (HTTPRoute …) against the Gateway API's own schemas.

kubernetes-validate ships no CRD kinds. The Gateway API's schemas come from the npm
package `@kubernetes-models/gateway-api`, generated from the Gateway API's Go types (the
same ones its CRDs are generated from): ajv validators, installed by
`tests/support/kube/gatewayapi/install.sh` (which `.ci/run` calls) into
`build/gateway-api`, never committed. Each check runs `node validate.mjs` on the object
and turns every error into a metav1 StatusCause, as `schemas` does for built-in kinds.

Approximations: the validators check types, enums, patterns, bounds and required fields,
not the CRDs' CEL rules (`x-kubernetes-validations`), and they allow fields the schema
does not name (a cluster prunes those, or refuses them with `fieldValidation=Strict`).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.kube import statuses

GROUP = "gateway.networking.k8s.io"
SCRIPT = Path(__file__).resolve().parent / "gatewayapi" / "validate.mjs"
INSTALL = SCRIPT.parent / "install.sh"
TIMEOUT = 30.0


class SchemasNotInstalled(Exception):
    """The npm package is not where the stand-in looks (run `install.sh`)."""


@functools.cache
def modules() -> Path:
    """The node_modules directory holding `@kubernetes-models/gateway-api`."""
    root = Path(__file__).resolve().parents[3]
    into = Path(os.environ.get("PLNT_GATEWAY_API_DIR") or root / "build" / "gateway-api")
    found = into / "node_modules"
    if not (found / "@kubernetes-models" / "gateway-api").is_dir():
        raise SchemasNotInstalled(
            f"the Gateway API schemas are not installed in {into}: run {INSTALL}"
        )
    if shutil.which("node") is None:
        raise SchemasNotInstalled("node is not installed (Debian: nodejs)")
    return found


def owns(api_version: str) -> bool:
    return api_version.partition("/")[0] == GROUP


def validate(obj: Mapping[str, Any]) -> list[statuses.Cause]:
    """Every schema error of `obj` as StatusCauses (empty when it is valid)."""
    done = subprocess.run(
        ["node", str(SCRIPT), str(modules())],
        input=json.dumps(obj).encode(),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"validate.mjs failed ({done.returncode}): {done.stderr.decode()}")
    answer = json.loads(done.stdout)
    if "missing" in answer:
        raise LookupError(answer["missing"])
    return [_cause(obj, error) for error in answer["errors"]]


def _cause(obj: Mapping[str, Any], error: Mapping[str, Any]) -> statuses.Cause:
    parts = [p for p in str(error.get("instancePath", "")).split("/") if p]
    keyword, params = str(error.get("keyword")), dict(error.get("params") or {})
    if keyword == "required":
        return statuses.field_required(_path([*parts, str(params.get("missingProperty"))]))
    path = _path(parts)
    value = _at(obj, parts)
    if keyword == "type":
        return statuses.Cause(
            "FieldValueTypeInvalid",
            f"Invalid value: {json.dumps(value)}: must be of type {params.get('type')}",
            path,
        )
    if keyword == "enum":
        allowed = ", ".join(json.dumps(v) for v in params.get("allowedValues") or [])
        return statuses.Cause(
            "FieldValueNotSupported",
            f"Unsupported value: {json.dumps(value)}: supported values: {allowed}",
            path,
        )
    return statuses.field_invalid(path, value, _detail(keyword, params))


def _detail(keyword: str, params: Mapping[str, Any]) -> str:
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"should be {params.get('comparison')} {params.get('limit')}"
    if keyword in ("minLength", "maxLength", "minItems", "maxItems"):
        return f"{keyword} {params.get('limit')}"
    if keyword == "pattern":
        return f"should match '{params.get('pattern')}'"
    if keyword == "format":
        return f"should match format {params.get('format')}"
    return f"{keyword} {json.dumps(dict(params))}"


def _at(obj: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(obj, list):
            obj = obj[int(part)] if part.isdigit() and int(part) < len(obj) else None
        elif isinstance(obj, Mapping):
            obj = obj.get(part)
        else:
            return None
    return obj


def _path(parts: list[str]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out
