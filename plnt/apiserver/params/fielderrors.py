"""kube's field errors on request options: the causes of a 422 `XOptions.meta.k8s.io`.

Shared by every verb's options (`writes`, `reads`, `deletes`), so the wording of an
unsupported value, a forbidden one or a bad field manager is written once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from plnt.api import errors
from plnt.registry.labelnames import go_quote

FIELD_VALIDATION_VALUES = ("Ignore", "Warn", "Strict")
FIELD_MANAGER_MAX = 128


def json_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def not_supported(field: str, shown: str, supported: Sequence[str]) -> errors.Cause:
    listed = ", ".join(go_quote(v) for v in supported)
    return errors.Cause(
        "FieldValueNotSupported", f"Unsupported value: {shown}: supported values: {listed}", field
    )


def forbidden(field: str, detail: str) -> errors.Cause:
    return errors.Cause("FieldValueForbidden", f"Forbidden: {detail}", field)


def options_invalid(kind: str, causes: Sequence[errors.Cause]) -> errors.Invalid:
    return errors.Invalid.of(f"{kind}.meta.k8s.io", "", causes)


def field_manager_causes(manager: str) -> list[errors.Cause]:
    """kube's ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[errors.Cause] = []
    if len(manager.encode()) > FIELD_MANAGER_MAX:
        causes.append(
            errors.Cause(
                "FieldValueTooLong",
                f"Too long: may not be more than {FIELD_MANAGER_MAX} bytes",
                "fieldManager",
            )
        )
    position = 0
    for char in manager:
        if not char.isprintable():
            causes.append(
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(manager)}: invalid character "
                    f"U+{ord(char):04X} (at position {position})",
                    "fieldManager",
                )
            )
        position += len(char.encode())
    return causes


def dry_run_causes(values: Sequence[str]) -> list[errors.Cause]:
    if all(value == "All" for value in values):
        return []
    return [not_supported("dryRun", json_value(list(values)), ["All"])]


def field_validation_causes(value: str) -> list[errors.Cause]:
    if value in ("", *FIELD_VALIDATION_VALUES):
        return []
    return [not_supported("fieldValidation", go_quote(value), ["", "Ignore", "Strict", "Warn"])]
