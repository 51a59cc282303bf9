"""Server-side printing: meta.k8s.io/v1 Table built from a definition's columns.

Ages are rendered here as kubectl would (kubectl never formats time cells it
receives), and every row carries an object with a `kind` so kubectl can decode
the table and add NAMESPACE, labels and kind prefixes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from plnt.api import errors
from plnt.api.meta import parse_time
from plnt.registry.definitions import PrinterColumn, ResourceDefinition
from plnt.registry.objects import Object

INCLUDE_OBJECT_VALUES = ("None", "Metadata", "Object")


def human_duration(seconds: float) -> str:
    """kubectl's compact age: 45s, 3m20s, 15m, 5h30m, 20h, 3d4h, 40d, 2y30d, 9y."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(obj: Object, *, now: datetime | None = None) -> str:
    """Age of an object from its creationTimestamp ("<unknown>" without one)."""
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    moment = now or datetime.now(UTC)
    return human_duration((moment - parse_time(stamp)).total_seconds())


NAME_COLUMN = PrinterColumn(
    name="Name",
    type="string",
    format="name",
    description="Name must be unique within a namespace.",
    cell=lambda obj: obj.get("metadata", {}).get("name", ""),
)
AGE_COLUMN = PrinterColumn(
    name="Age",
    type="string",
    description="Time since the object was created.",
    cell=age,
)


def columns(definition: ResourceDefinition) -> tuple[PrinterColumn, ...]:
    """Name first, the kind's own columns, Age last (unless the kind places Age itself).

    A kind whose own columns include a `format: name` column lays its table out
    completely itself: core/v1 Events, for one, print LAST SEEN first and their
    name only with `-o wide`, as kube-apiserver's printer does.
    """
    own = definition.columns
    if any(c.format == "name" for c in own):
        return own
    has_age = any(c.name == "Age" for c in own)
    return (NAME_COLUMN, *own) if has_age else (NAME_COLUMN, *own, AGE_COLUMN)


def column_definitions(definition: ResourceDefinition) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in columns(definition)
    ]


def row(definition: ResourceDefinition, obj: Object, include_object: str) -> dict[str, Any]:
    cells = []
    for column in columns(definition):
        value = column.cell(obj)
        cells.append("<none>" if value is None or value == "" else value)
    out: dict[str, Any] = {"cells": cells}
    if include_object == "Object":
        out["object"] = obj
    elif include_object == "Metadata":
        out["object"] = partial_object_metadata(obj)
    return out


def partial_object_metadata(obj: Object) -> Object:
    """meta.k8s.io/v1 PartialObjectMetadata: the object's metadata only."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def check_include_object(value: str | None) -> str:
    """`includeObject` defaults to Metadata; anything but None/Metadata/Object is a 400."""
    if value in (None, ""):
        return "Metadata"
    if value not in INCLUDE_OBJECT_VALUES:
        raise errors.BadRequest(
            f'includeObject: Unsupported value: "{value}": supported values: '
            + ", ".join(f'"{v}"' for v in INCLUDE_OBJECT_VALUES)
        )
    return value


def table(
    definition: ResourceDefinition,
    objects: list[Object],
    *,
    include_object: str,
    resource_version: str = "",
    continue_token: str | None = None,
    remaining: int | None = None,
    with_columns: bool = True,
) -> Object:
    """A Table of `objects`; `with_columns=False` for watch events after the first."""
    meta: dict[str, Any] = {}
    if resource_version:
        meta["resourceVersion"] = resource_version
    if continue_token:
        meta["continue"] = continue_token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": column_definitions(definition) if with_columns else [],
        "rows": [row(definition, obj, include_object) for obj in objects],
    }
