"""Events as kube-apiserver stores and serves them: one stored form, two API views.

kube keeps Events in the core internal type and converts at the edge: events.k8s.io/v1
`regarding` is core `involvedObject`, `note` is `message`, `reportingController` is
`reportingComponent`, and the core-only fields come back as `deprecatedSource`,
`deprecatedFirstTimestamp`, `deprecatedLastTimestamp` and `deprecatedCount`
(k8s.io/kubernetes `pkg/apis/events/v1` conversions). The stand-in stores the core/v1
JSON and converts both ways with these functions.

`validate` is kube's `ValidateEventCreate`/`ValidateEventUpdate`
(`pkg/apis/core/validation/events.go`): the legacy checks for every version, and the
strict checks (eventTime, reportingController, reportingInstance, action, reason; no
core-only fields) only for writes through events.k8s.io/v1. Field selectors are those
of kube's event strategy, with events.k8s.io's `regarding.*` and `reportingController`
labels converted to the stored names. No I/O here.
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.kube import statuses

Obj = dict[str, Any]

# events.k8s.io/v1 name -> core/v1 name, for fields that only change their name.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SHARED = (
    "metadata",
    "eventTime",
    "series",
    "reportingInstance",
    "action",
    "reason",
    "related",
    "type",
)

CORE_FIELD_LABELS = (
    "metadata.name", "metadata.namespace",
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
)  # fmt: skip
EVENTS_V1_FIELD_LABELS = {
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    **{
        label: label
        for label in ("metadata.name", "metadata.namespace", "reason", "type", "source")
    },
}


def to_events_v1(core: Obj) -> Obj:
    """The events.k8s.io/v1 view of a stored core/v1 Event."""
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _SHARED:
        if key in core:
            out[key] = core[key]
    for new, old in _RENAMED.items():
        value = core.get(old)
        if value not in (None, "", 0, {}):
            out[new] = value
    out.setdefault("eventTime", None)  # a required field: kube writes null when unset
    return out


def from_events_v1(obj: Obj) -> Obj:
    """The stored core/v1 form of an events.k8s.io/v1 Event."""
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key in _SHARED:
        if key in obj:
            out[key] = obj[key]
    for new, old in _RENAMED.items():
        if new in obj:
            out[old] = obj[new]
    out.setdefault("involvedObject", {})
    return out


def to_core(stored: Obj) -> Obj:
    out = dict(stored)
    out["kind"], out["apiVersion"] = "Event", "v1"
    out.setdefault("involvedObject", {})
    return out


def from_core(obj: Obj) -> Obj:
    out = dict(obj)
    out["kind"], out["apiVersion"] = "Event", "v1"
    return out


def field_value(stored: Obj, label: str) -> str:
    """The value kube's event strategy gives a field label (stored names)."""
    if label == "source":
        return str((stored.get("source") or {}).get("component", ""))
    head, _, tail = label.partition(".")
    value: Any = stored.get(head)
    if tail:
        value = (value or {}).get(tail)
    return "" if value is None else str(value)


_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def validate(stored: Obj, old: Obj | None, *, strict: bool) -> list[statuses.Cause]:
    """kube's Event validation on the stored form; `strict` for events.k8s.io/v1 writes."""
    causes = _legacy(stored)
    if not strict:
        return causes
    if old is None:
        if not stored.get("eventTime"):
            causes.append(statuses.field_required("eventTime"))
        if stored.get("type") not in ("Normal", "Warning"):
            causes.append(
                statuses.field_invalid("type", "", f"has invalid value: {stored.get('type', '')}")
            )
        for key in ("firstTimestamp", "lastTimestamp"):
            if stored.get(key):
                causes.append(statuses.field_invalid(key, "", "needs to be unset"))
        if stored.get("count"):
            causes.append(statuses.field_invalid("count", "", "needs to be unset"))
        source = stored.get("source") or {}
        if source.get("component") or source.get("host"):
            causes.append(statuses.field_invalid("source", "", "needs to be unset"))
        causes.extend(_series(stored))
        return causes
    if stored.get("series") != old.get("series"):
        causes.extend(_series(stored))
    for key in (
        "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp",
        "count", "type", "eventTime", "action", "related", "reportingComponent",
        "reportingInstance",
    ):  # fmt: skip
        if stored.get(key) != old.get(key):
            path = {"reportingComponent": "reportingController"}.get(key, key)
            causes.append(statuses.field_invalid(path, stored.get(key), "field is immutable"))
    return causes


def _series(stored: Obj) -> list[statuses.Cause]:
    series = stored.get("series")
    if series is None:
        return []
    causes = []
    if int(series.get("count") or 0) < 2:
        causes.append(statuses.field_invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(statuses.field_required("series.lastObservedTime"))
    return causes


def _legacy(stored: Obj) -> list[statuses.Cause]:
    causes: list[statuses.Cause] = []
    meta = stored.get("metadata") or {}
    namespace = meta.get("namespace", "")
    involved_ns = (stored.get("involvedObject") or {}).get("namespace", "")
    mismatch = statuses.field_invalid(
        "involvedObject.namespace", involved_ns, "does not match event.namespace"
    )
    if not stored.get("eventTime"):
        if not involved_ns:
            if namespace not in ("", "default"):
                causes.append(mismatch)
        elif namespace != involved_ns:
            causes.append(mismatch)
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            causes.append(mismatch)
        controller = stored.get("reportingComponent", "")
        if not controller:
            causes.append(statuses.field_required("reportingController"))
        elif not _QUALIFIED_NAME.match(controller) or len(controller.rpartition("/")[2]) > 63:
            causes.append(
                statuses.field_invalid(
                    "reportingController",
                    controller,
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character",
                )
            )
        for key, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
            value = stored.get(key, "")
            if not value:
                causes.append(statuses.field_required(key))
            elif len(value) > limit:
                causes.append(
                    statuses.field_invalid(key, "", f"can have at most {limit} characters")
                )
        if len(stored.get("message", "")) > 1024:
            causes.append(statuses.field_invalid("message", "", "can have at most 1024 characters"))
    if namespace and not _DNS1123_SUBDOMAIN.match(namespace):
        causes.append(
            statuses.field_invalid(
                "namespace",
                namespace,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    return causes
