"""ObjectMeta validated as kube-apiserver validates a custom resource's.

apimachinery's ValidateObjectMetaAccessor and ValidateObjectMetaAccessorUpdate rule by
rule (`validate_create`, `validate_update`), with a custom resource's name rule
(NameIsDNSSubdomain) unless a strategy supplies another: generateName, name, namespace,
generation, labels, annotations (keys and the 256 KiB total), ownerReferences
(apiVersion, kind, name and uid required, Event never an owner, at most one controller),
finalizers (qualified names, not both orphan and foregroundDeletion, none added while
deleting), managedFields (operation, fieldsType, manager, subresource), and on update the
immutable name, namespace, uid, creationTimestamp, deletionTimestamp and
deletionGracePeriodSeconds. Every violation is a metav1 cause with kube's field path
(kube names `metadata.finalizers` and `metadata.ownerReferences.uid` without an index)
and kube's message; values print as Go's field errors print them, except that a pointer
inside a printed struct shows its value where Go shows an address.

It runs on metadata that already decoded (`metadecoding`) and, on update, after the
strategy kept what kube's BeforeUpdate keeps (`strategy.prepare_update`).
`finalizer_warnings` are the warnings kube gives a custom resource for finalizer names
without a domain prefix. No I/O here; the only exceptions are the API errors the store
raises from these answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from plnt.api.errors import Cause
from plnt.registry import labelnames
from plnt.registry.labelnames import go_quote
from plnt.registry.metadecoding import go_time, parse_time

TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * (1 << 10)
"""kube's TotalAnnotationSizeLimitB: keys plus values, in bytes."""

FIELD_IMMUTABLE = "field is immutable"
FIELD_MANAGER_MAX_LENGTH = 128
MAX_SUBRESOURCE_NAME_LENGTH = 256
NON_NEGATIVE = "must be greater than or equal to 0"
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"

NameRule = Callable[[str, bool], list[str]]
"""kube's ValidateNameFunc: why `name` (a generateName prefix when True) is not valid."""


def _invalid(field: str, shown: str, detail: str) -> Cause:
    return Cause("FieldValueInvalid", f"Invalid value: {shown}: {detail}", field)


def _text(value: Any) -> str:
    """A decoded string field: None (Go's zero value) reads as ""."""
    return value if isinstance(value, str) else ""


def dns_subdomain_name(name: str, prefix: bool) -> list[str]:
    """kube's NameIsDNSSubdomain: a custom resource's names (generateName with its dash masked)."""
    if prefix:
        name = _mask_trailing_dash(name)
    return labelnames.dns1123_subdomain_errors(name)


def dns_label_name(name: str, prefix: bool) -> list[str]:
    """kube's NameIsDNSLabel (ValidateNamespaceName)."""
    if prefix:
        name = _mask_trailing_dash(name)
    return labelnames.dns1123_label_errors(name)


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """kube's ValidatePathSegmentName: what every update checks of a name."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


def _mask_trailing_dash(name: str) -> str:
    # kube drops the last two characters and appends "a" (a one-character "-" becomes "a").
    return name[:-2] + "a" if name.endswith("-") else name


def _names(meta: Mapping[str, Any], name_rule: NameRule) -> list[Cause]:
    """The causes of `generateName` (as a prefix) and `name` under `name_rule`."""
    causes: list[Cause] = []
    generate_name = _text(meta.get("generateName"))
    if generate_name:
        causes += [
            _invalid("metadata.generateName", go_quote(generate_name), problem)
            for problem in name_rule(generate_name, True)
        ]
    return causes + _name_causes(_text(meta.get("name")), name_rule)


def validate_create(
    meta: Mapping[str, Any], *, namespaced: bool, name_rule: NameRule = dns_subdomain_name
) -> list[Cause]:
    """ValidateObjectMetaAccessor of a new object whose name has been generated."""
    return _names(meta, name_rule) + _common(meta, namespaced=namespaced)


def validate_update(
    meta: Mapping[str, Any],
    old: Mapping[str, Any],
    *,
    namespaced: bool,
    name_rule: NameRule = path_segment_name,
) -> list[Cause]:
    """validateCommonFields of an update: the object's rules and what may not change."""
    causes = _names(meta, name_rule)
    # Client-sent managedFields are the field manager's to replace or ignore
    # (plnt.registry.managedfields), as kube's field manager does before validation.
    causes += _common(meta, namespaced=namespaced, managed=False)
    if old.get("deletionTimestamp"):
        added = sorted(set(_strings(meta.get("finalizers"))) - set(_strings(old.get("finalizers"))))
        if added:
            listed = ", ".join(go_quote(name) for name in added)
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{listed}}}",
                    "metadata.finalizers",
                )
            )
    if not _text(meta.get("resourceVersion")):
        causes.append(_invalid("metadata.resourceVersion", '""', "must be specified for an update"))
    generation, old_generation = meta.get("generation"), old.get("generation")
    if (
        isinstance(generation, int)
        and isinstance(old_generation, int)
        and generation < old_generation
    ):
        causes.append(_invalid("metadata.generation", str(generation), "must not be decremented"))
    for field in ("name", "namespace", "uid"):
        if _text(meta.get(field)) != _text(old.get(field)):
            causes.append(
                _invalid(f"metadata.{field}", go_quote(_text(meta.get(field))), FIELD_IMMUTABLE)
            )
    for field in ("creationTimestamp", "deletionTimestamp"):
        new_time, old_time = meta.get(field), old.get(field)
        if _time_key(new_time) != _time_key(old_time):
            shown = go_time(new_time) if isinstance(new_time, str) else "null"
            causes.append(_invalid(f"metadata.{field}", shown, FIELD_IMMUTABLE))
    grace, old_grace = meta.get("deletionGracePeriodSeconds"), old.get("deletionGracePeriodSeconds")
    if grace != old_grace:
        shown = "null" if grace is None else str(grace)
        causes.append(_invalid("metadata.deletionGracePeriodSeconds", shown, FIELD_IMMUTABLE))
    return causes


def _time_key(value: Any) -> Any:
    """Times compare as kube compares metav1.Time: to the second, whatever the zone."""
    if not isinstance(value, str) or not value:
        return None
    moment = parse_time(value)
    return value if moment is None else int(moment.timestamp())


def _name_causes(name: str, name_rule: NameRule) -> list[Cause]:
    if not name:
        return [
            Cause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        ]
    return [_invalid("metadata.name", go_quote(name), p) for p in name_rule(name, False)]


def _common(meta: Mapping[str, Any], *, namespaced: bool, managed: bool = True) -> list[Cause]:
    """validateObjectMetaAccessorWithOptsCommon: what creates and updates share."""
    causes: list[Cause] = []
    namespace = _text(meta.get("namespace"))
    if namespaced:
        if not namespace:
            causes.append(Cause("FieldValueRequired", "Required value", "metadata.namespace"))
        else:
            causes += [
                _invalid("metadata.namespace", go_quote(namespace), problem)
                for problem in dns_label_name(namespace, False)
            ]
    elif namespace:
        forbidden = "Forbidden: not allowed on this type"
        causes.append(Cause("FieldValueForbidden", forbidden, "metadata.namespace"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(_invalid("metadata.generation", str(generation), NON_NEGATIVE))
    causes += label_causes(_string_map(meta.get("labels")))
    causes += annotation_causes(_string_map(meta.get("annotations")))
    causes += owner_reference_causes(_dicts(meta.get("ownerReferences")))
    causes += finalizer_causes(_strings(meta.get("finalizers")))
    if managed:
        causes += managed_fields_causes(meta.get("managedFields"))
    return causes


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {key: item if isinstance(item, str) else "" for key, item in value.items()}


def _strings(value: Any) -> list[str]:
    return [_text(item) for item in value] if isinstance(value, list) else []


def _dicts(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, dict) else {} for item in value]


def label_causes(labels: Mapping[str, str], field: str = "metadata.labels") -> list[Cause]:
    """ValidateLabels: every key a qualified name, every value a label value."""
    causes: list[Cause] = []
    for key, value in labels.items():
        for problem in labelnames.label_key_errors(key):
            causes.append(_invalid(field, go_quote(key), problem))
        for problem in labelnames.label_value_errors(value):
            causes.append(_invalid(field, go_quote(value), problem))
    return causes


def annotation_causes(
    annotations: Mapping[str, str], field: str = "metadata.annotations"
) -> list[Cause]:
    """ValidateAnnotations: keys are qualified names in any case; 256 KiB in all."""
    causes = [
        _invalid(field, go_quote(key), problem)
        for key in annotations
        for problem in labelnames.label_key_errors(key.lower())
    ]
    total = sum(_bytes(key) + _bytes(value) for key, value in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_B:
        causes.append(_too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT_B))
    return causes


def _too_long(field: str, limit: int) -> Cause:
    return Cause("FieldValueTooLong", f"Too long: may not be more than {limit} bytes", field)


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def owner_reference_causes(
    references: Sequence[Mapping[str, Any]], field: str = "metadata.ownerReferences"
) -> list[Cause]:
    """ValidateOwnerReferences: each reference complete, no Event owner, one controller."""
    causes: list[Cause] = []
    first_controller = ""
    for ref in references:
        api_version, kind = _text(ref.get("apiVersion")), _text(ref.get("kind"))
        group, version = _group_version(api_version)
        if not version:
            causes.append(
                _invalid(f"{field}.apiVersion", go_quote(api_version), "version must not be empty")
            )
        for name in ("kind", "name", "uid"):
            if not _text(ref.get(name)):
                causes.append(_invalid(f"{field}.{name}", '""', "must not be empty"))
        if (group, version, kind) == ("", "v1", "Event"):
            causes.append(
                _invalid(
                    field,
                    _go_owner_reference(ref),
                    f"{group}/{version}, Kind={kind} is disallowed from being an owner",
                )
            )
        if ref.get("controller") is True:
            current = f"{kind}/{_text(ref.get('name'))}"
            if first_controller:
                shown = (
                    "[]v1.OwnerReference{"
                    + ", ".join(_go_owner_reference(r) for r in references)
                    + "}"
                )
                causes.append(
                    _invalid(
                        field,
                        shown,
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return causes


def _group_version(api_version: str) -> tuple[str, str]:
    """schema.ParseGroupVersion, with what FromAPIVersionAndKind makes of a parse error."""
    if not api_version:
        return "", ""
    if api_version == "v1" or "/" not in api_version:
        return "", api_version
    parts = api_version.split("/")
    if len(parts) != 2:
        return "", ""
    return parts[0], parts[1]


def _go_owner_reference(ref: Mapping[str, Any]) -> str:
    """%#v of a metav1.OwnerReference (a pointer shows its value, not an address)."""

    def pointer(value: Any) -> str:
        return "(*bool)(nil)" if not isinstance(value, bool) else f"(*bool)({str(value).lower()})"

    return (
        f"v1.OwnerReference{{APIVersion:{go_quote(_text(ref.get('apiVersion')))}, "
        f"Kind:{go_quote(_text(ref.get('kind')))}, Name:{go_quote(_text(ref.get('name')))}, "
        f"UID:{go_quote(_text(ref.get('uid')))}, Controller:{pointer(ref.get('controller'))}, "
        f"BlockOwnerDeletion:{pointer(ref.get('blockOwnerDeletion'))}}}"
    )


def finalizer_causes(finalizers: Sequence[str], field: str = "metadata.finalizers") -> list[Cause]:
    """ValidateFinalizers: qualified names, and never both orphan and foregroundDeletion."""
    causes = [
        _invalid(field, go_quote(name), problem)
        for name in finalizers
        for problem in labelnames.label_key_errors(name)
    ]
    if ORPHAN_FINALIZER in finalizers and FOREGROUND_FINALIZER in finalizers:
        listed = ", ".join(go_quote(name) for name in finalizers)
        causes.append(
            _invalid(
                field,
                f"[]string{{{listed}}}",
                f"finalizer {ORPHAN_FINALIZER} and {FOREGROUND_FINALIZER} cannot be both set",
            )
        )
    return causes


def managed_fields_causes(entries: Any, field: str = "metadata.managedFields") -> list[Cause]:
    """ValidateManagedFields: operation, fieldsType, manager and subresource of each entry."""
    causes: list[Cause] = []
    for index, entry in enumerate(_dicts(entries)):
        at = f"{field}[{index}]"
        operation = _text(entry.get("operation"))
        if operation not in ("Apply", "Update"):
            causes.append(
                _invalid(f"{at}.operation", go_quote(operation), "must be `Apply` or `Update`")
            )
        fields_type = _text(entry.get("fieldsType"))
        if fields_type and fields_type != "FieldsV1":
            causes.append(_invalid(f"{at}.fieldsType", go_quote(fields_type), "must be `FieldsV1`"))
        causes += field_manager_causes(_text(entry.get("manager")), f"{at}.manager")
        if _bytes(_text(entry.get("subresource"))) > MAX_SUBRESOURCE_NAME_LENGTH:
            causes.append(_too_long(f"{at}.subresource", MAX_SUBRESOURCE_NAME_LENGTH))
    return causes


def field_manager_causes(manager: str, field: str = "fieldManager") -> list[Cause]:
    """ValidateFieldManager: at most 128 bytes, printable characters only."""
    causes: list[Cause] = []
    if _bytes(manager) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(_too_long(field, FIELD_MANAGER_MAX_LENGTH))
    for position, char in _byte_positions(manager):
        if not char.isprintable() and char != " ":
            causes.append(
                _invalid(
                    field,
                    go_quote(manager),
                    f"invalid character U+{ord(char):04X} (at position {position})",
                )
            )
    return causes


def _byte_positions(text: str) -> Iterator[tuple[int, str]]:
    position = 0
    for char in text:
        yield position, char
        position += _bytes(char)


def finalizer_warnings(meta: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[str]:
    """The warnings kube gives a custom resource for each finalizer added without a domain."""
    added = sorted(
        set(_strings(meta.get("finalizers"))) - set(_strings((old or {}).get("finalizers")))
    )
    return [
        f"metadata.finalizers: {go_quote(name)}: prefer a domain-qualified finalizer name "
        "including a path (/) to avoid accidental conflicts with other finalizer writers"
        for name in added
        if "/" not in name and not labelnames.label_key_errors(name)
    ]
