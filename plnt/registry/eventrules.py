"""The rules kube-apiserver holds core/v1 Events to, as plnt applies them standalone.

kube validates an Event written through core/v1 with `legacyValidateEvent` only
(pkg/apis/core/validation/events.go; events.k8s.io/v1's stricter rules are not applied
to core/v1): an Event without `eventTime` (as `kubectl`, client-go's legacy recorder and
plnt's own recorder write them) must be in its involved object's namespace; one with
`eventTime` (the new events API's shape) needs `reportingComponent`, `reportingInstance`,
`action` and `reason`. Both keep `message` to 1024 characters.

Times are normalised as kube's types serialise them: `firstTimestamp` and
`lastTimestamp` are metav1.Time (whole seconds, UTC), `eventTime` and
`series.lastObservedTime` metav1.MicroTime (six decimals, UTC). A client reading an
Event back sees what it would see from kube-apiserver, whatever precision it sent.
"""

from __future__ import annotations

import functools
from datetime import UTC
from typing import Any

from plnt.api.errors import Cause
from plnt.registry import labelnames
from plnt.registry.metadecoding import parse_time
from plnt.registry.objects import Object

REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128
REASON_LIMIT = 128
NOTE_LIMIT = 1024
SYSTEM_NAMESPACES = ("default", "kube-system")

SECOND_FIELDS = ("firstTimestamp", "lastTimestamp")
MICRO_FIELDS = ("eventTime",)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _required(field: str) -> Cause:
    return Cause("FieldValueRequired", "Required value", field)


def _invalid(field: str, shown: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", field)


def _too_long(field: str, limit: int) -> Cause:
    return _invalid(field, '""', f"can have at most {limit} characters")


def causes(obj: Object) -> list[Cause]:
    """Every way `obj` breaks kube's core/v1 Event rules (empty: none)."""
    involved = obj.get("involvedObject")
    involved_namespace = _text(involved.get("namespace")) if isinstance(involved, dict) else ""
    namespace = _text((obj.get("metadata") or {}).get("namespace"))
    mismatch = _invalid(
        "involvedObject.namespace", f'"{involved_namespace}"', "does not match event.namespace"
    )
    found: list[Cause] = []
    if not obj.get("eventTime"):
        if involved_namespace == "":
            if namespace not in ("", "default"):
                found.append(mismatch)
        elif namespace != involved_namespace:
            found.append(mismatch)
    else:
        if involved_namespace == "" and namespace not in SYSTEM_NAMESPACES:
            found.append(mismatch)
        component = _text(obj.get("reportingComponent"))
        if not component:
            found.append(_required("reportingComponent"))
        for detail in labelnames.label_key_errors(component) if component else ():
            found.append(_invalid("reportingComponent", f'"{component}"', detail))
        instance = _text(obj.get("reportingInstance"))
        if not instance:
            found.append(_required("reportingInstance"))
        if len(instance) > REPORTING_INSTANCE_LIMIT:
            found.append(_too_long("reportingInstance", REPORTING_INSTANCE_LIMIT))
        action = _text(obj.get("action"))
        if not action:
            found.append(_required("action"))
        if len(action) > ACTION_LIMIT:
            found.append(_too_long("action", ACTION_LIMIT))
        reason = _text(obj.get("reason"))
        if not reason:
            found.append(_required("reason"))
        if len(reason) > REASON_LIMIT:
            found.append(_too_long("reason", REASON_LIMIT))
        if len(_text(obj.get("message"))) > NOTE_LIMIT:
            found.append(_too_long("message", NOTE_LIMIT))
    return found


@functools.lru_cache(maxsize=256)
def _normalised(text: str, *, micro: bool) -> str:
    """`text` at the precision kube keeps. Remembered: the recorder stamps every Event of
    one second with the same text, and parsing it again was a fifth of an Event's write."""
    moment = parse_time(text)
    if moment is None:
        return text  # not a time: the schema's rules answer for it
    utc = moment.astimezone(UTC)
    if micro:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalise_times(obj: Object) -> None:
    """Rewrite the Event's times at the precision kube serialises them with."""
    for field in SECOND_FIELDS:
        if isinstance(obj.get(field), str):
            obj[field] = _normalised(obj[field], micro=False)
    for field in MICRO_FIELDS:
        if isinstance(obj.get(field), str):
            obj[field] = _normalised(obj[field], micro=True)
    series = obj.get("series")
    if isinstance(series, dict) and isinstance(series.get("lastObservedTime"), str):
        series["lastObservedTime"] = _normalised(series["lastObservedTime"], micro=True)
