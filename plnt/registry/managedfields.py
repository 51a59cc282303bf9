"""Field ownership: the `metadata.managedFields` every write records, in kube's FieldsV1 format.

kubectl and controllers read managedFields to learn who set what (`kubectl get
--show-managed-fields`), and server-side apply needs them to decide what an
applier may remove and where it collides with someone else. So every write
records, for its field manager, the set of fields it set or changed, exactly as
kube-apiserver's field manager does for custom resources:

* A field set is a set of paths; a path is a tuple of FieldsV1 keys (`f:spec`,
  `f:replicas`). plnt's schema has no list-map keys, so every list is one
  (atomic) field and paths are made of `f:` keys only; other key kinds found in
  client-sent entries (`k:`, `v:`, `i:`) are kept as opaque elements.
* An update owns what it added or modified (containers that appeared count
  too, which is why FieldsV1 shows `.: {}` under them); fields it removed, or
  took over, leave every other manager's set. Entries whose set becomes empty
  are dropped. The time of an entry moves only when its write took fields.
* Paths kube never tracks (apiVersion, kind, metadata itself, name, namespace,
  uid, resourceVersion, generation, creationTimestamp, managedFields) are
  stripped from the acting manager's set; `ignored` prefixes (status on the
  main resource, everything but status on `/status`) are neither compared nor
  owned.
* Client-sent managedFields on create/update/patch: a decodable non-empty list
  replaces the tracked entries, `[]` or `[{}]` resets them, anything else
  (absent, undecodable) keeps the live ones. `/status` writes ignore them.

No I/O here. Exceptions: `ManagedFieldsError(ValueError)` for a managedFields
list or FieldsV1 value that cannot be decoded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

Path = tuple[str, ...]
FieldSet = frozenset[Path]

APPLY = "Apply"
UPDATE = "Update"
FIELDS_V1 = "FieldsV1"
_MEMBER = "."
_KEY_PREFIXES = ("f:", "k:", "v:", "i:")
_ABSENT: Any = object()

EMPTY: FieldSet = frozenset()


class ManagedFieldsError(ValueError):
    """A managedFields list or FieldsV1 value that is not well formed."""


def field_path(*names: str) -> Path:
    """The path of nested object fields: `field_path("spec", "replicas")`."""
    return tuple(f"f:{name}" for name in names)


STRIPPED: FieldSet = frozenset(
    {
        field_path("apiVersion"),
        field_path("kind"),
        field_path("metadata"),
        *(
            field_path("metadata", name)
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)
"""Paths never recorded for the acting manager (kube's strip-meta set)."""


def path_string(path: Path) -> str:
    """`.spec.replicas`, as conflict messages and causes name a field."""
    out: list[str] = []
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f":
            out.append(f".{text}")
        elif kind == "i":
            out.append(f"[{text}]")
        elif kind == "v":
            out.append(f"[={text}]")
        else:
            try:
                keys = json.loads(text)
                out.append(
                    "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(keys.items())) + "]"
                )
            except (ValueError, AttributeError):
                out.append(f"[{text}]")
    return "".join(out)


# --- FieldsV1 -----------------------------------------------------------------------------


def to_fields_v1(fields: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 tree of a set: nested keys, `.` marking a member that has children."""
    root: dict[str, Any] = {}
    members: list[Path] = []
    for path in fields:
        if not path:
            continue
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.append(path)
    for path in members:
        node = root
        for element in path:
            node = node[element]
        if node and _MEMBER not in node:
            node[_MEMBER] = {}
    return root


def from_fields_v1(value: Any) -> FieldSet:
    """Decode a FieldsV1 tree; `ManagedFieldsError` if it is not one."""
    out: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict):
            raise ManagedFieldsError(f"FieldsV1 at {path_string(path) or '.'} is not an object")
        if not node and path:
            out.add(path)
        for key, child in node.items():
            if key == _MEMBER:
                if not path or child != {}:
                    raise ManagedFieldsError("a '.' marker must be an empty object under a field")
                out.add(path)
                continue
            if not isinstance(key, str) or not key.startswith(_KEY_PREFIXES):
                raise ManagedFieldsError(f"invalid FieldsV1 key {key!r}")
            walk(child, (*path, key))

    walk(value, ())
    return frozenset(out)


# --- set operations -------------------------------------------------------------------------


def with_parents(fields: Iterable[Path]) -> FieldSet:
    """The set plus every prefix of its paths (a parent of an owned field is in use)."""
    out: set[Path] = set()
    for path in fields:
        for end in range(1, len(path) + 1):
            out.add(path[:end])
    return frozenset(out)


def has_prefix(path: Path, prefixes: FieldSet) -> bool:
    return any(path[:end] in prefixes for end in range(1, len(path) + 1))


def without_prefixes(fields: Iterable[Path], prefixes: FieldSet) -> FieldSet:
    """Drop every path at or below one of `prefixes` (kube's RecursiveDifference).

    Only the lengths the prefixes actually have are tried (usually just 1, for
    `status`), which keeps this linear in the number of fields.
    """
    if not prefixes:
        return frozenset(fields)
    lengths = sorted({len(prefix) for prefix in prefixes})
    return frozenset(
        path for path in fields if not any(path[:n] in prefixes for n in lengths if n <= len(path))
    )


def strip(fields: Iterable[Path]) -> FieldSet:
    return frozenset(fields) - STRIPPED


# --- comparison ------------------------------------------------------------------------------


def same_value(a: Any, b: Any) -> bool:
    """JSON equality: bools are not numbers, 1 equals 1.0, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return bool(a == b) and (type(a) is type(b) or {type(a), type(b)} <= {int, float})


@dataclass(frozen=True, slots=True)
class Comparison:
    """What changed from one object to another, as field sets."""

    added: FieldSet = EMPTY
    modified: FieldSet = EMPTY
    removed: FieldSet = EMPTY

    @property
    def changed(self) -> FieldSet:
        """Added or modified: what a write takes ownership of."""
        return self.added | self.modified

    def excluding(self, prefixes: FieldSet) -> Comparison:
        return Comparison(
            without_prefixes(self.added, prefixes),
            without_prefixes(self.modified, prefixes),
            without_prefixes(self.removed, prefixes),
        )


def _all_paths(value: Any, path: Path, out: set[Path]) -> None:
    out.add(path)
    if isinstance(value, dict):
        for key, item in value.items():
            _all_paths(item, (*path, f"f:{key}"), out)


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> Comparison:
    """Fields added, modified and removed from `old` to `new` (lists are atomic)."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()

    def walk(a: Any, b: Any, path: Path) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in a.keys() | b.keys():
                child = (*path, f"f:{key}")
                left, right = a.get(key, _ABSENT), b.get(key, _ABSENT)
                if left is _ABSENT:
                    _all_paths(right, child, added)
                elif right is _ABSENT:
                    _all_paths(left, child, removed)
                else:
                    walk(left, right, child)
            return
        if not same_value(a, b):
            modified.add(path)
            if isinstance(a, dict):
                for key, item in a.items():
                    _all_paths(item, (*path, f"f:{key}"), removed)
            if isinstance(b, dict):
                for key, item in b.items():
                    _all_paths(item, (*path, f"f:{key}"), added)

    walk(dict(old), dict(new), ())
    return Comparison(frozenset(added), frozenset(modified), frozenset(removed))


def content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without `metadata.managedFields` (what ownership is computed on)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return dict(obj)


# --- entries ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """One managedFields entry: a manager's field set for one operation (and subresource)."""

    manager: str
    operation: str
    api_version: str
    fields: FieldSet = field(default=EMPTY)
    time: str | None = None
    subresource: str = ""

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """Who the entry belongs to; appliers are one manager whatever the apiVersion."""
        version = "" if self.operation == APPLY else self.api_version
        return (self.manager, self.operation, self.subresource, version)

    def describe(self) -> str:
        """How conflict messages name the manager: `"kubectl-patch" using plnt.work/v1`."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time is not None:
            body["time"] = self.time
        body["fieldsType"] = FIELDS_V1
        body["fieldsV1"] = to_fields_v1(self.fields)
        if self.subresource:
            body["subresource"] = self.subresource
        return body


def _text(entry: Mapping[str, Any], name: str, index: int) -> str:
    value = entry.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ManagedFieldsError(f"{name} of managed fields entry {index} must be a string")
    return value


def decode(value: Any) -> list[Entry]:
    """Entries of a managedFields list; a later entry with the same identity wins."""
    if not isinstance(value, list):
        raise ManagedFieldsError("managedFields must be a list")
    found: dict[tuple[str, str, str, str], Entry] = {}
    for index, raw in enumerate(value):
        if not isinstance(raw, dict):
            raise ManagedFieldsError(f"managed fields entry {index} must be an object")
        operation = _text(raw, "operation", index)
        if operation not in (APPLY, UPDATE):
            raise ManagedFieldsError("operation must be `Apply` or `Update`")
        api_version = _text(raw, "apiVersion", index)
        if not api_version:
            raise ManagedFieldsError("apiVersion must not be empty")
        fields_type = _text(raw, "fieldsType", index)
        if fields_type != FIELDS_V1:
            raise ManagedFieldsError(
                f"invalid fieldsType {fields_type!r} in managed fields entry {index}"
            )
        entry = Entry(
            manager=_text(raw, "manager", index),
            operation=operation,
            api_version=api_version,
            fields=from_fields_v1(raw.get("fieldsV1") or {}),
            time=_text(raw, "time", index) or None,
            subresource=_text(raw, "subresource", index),
        )
        found[entry.identity] = entry
    return list(found.values())


def decode_or_empty(obj: Mapping[str, Any]) -> list[Entry]:
    """The tracked entries of a stored object (none if absent or undecodable)."""
    raw = (obj.get("metadata") or {}).get("managedFields")
    if raw is None:
        return []
    try:
        return decode(raw)
    except ManagedFieldsError:
        return []


def is_reset(value: Any) -> bool:
    """`[]` or `[{}]`: the client asks to drop every entry."""
    return isinstance(value, list) and (value == [] or value == [{}])


def _order(entry: Entry) -> tuple[str, str, str, str, str]:
    return (entry.operation, entry.time or "", entry.manager, entry.api_version, entry.subresource)


def encode(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The wire list: entries with fields only, Apply before Update, then oldest first."""
    return [e.to_wire() for e in sorted((e for e in entries if e.fields), key=_order)]


def store_entries(obj: dict[str, Any], entries: Sequence[Entry]) -> None:
    """Write `entries` into `metadata.managedFields` (the key is absent when none are left)."""
    meta = obj.setdefault("metadata", {})
    wire = encode(entries)
    if wire:
        meta["managedFields"] = wire
    else:
        meta.pop("managedFields", None)


def base_entries(sent: Any, live: Mapping[str, Any] | None, *, subresource: str) -> list[Entry]:
    """The entries an update starts from: the client's, a reset, or the live ones."""
    live_entries = decode_or_empty(live) if live is not None else []
    if subresource or sent is None:
        return live_entries
    if is_reset(sent):
        return []
    try:
        entries = decode(sent)
    except ManagedFieldsError:
        return live_entries
    return entries if any(e.fields for e in entries) else live_entries


def record_update(
    entries: Sequence[Entry],
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    manager: str,
    api_version: str,
    now: str,
    subresource: str = "",
    ignored: FieldSet = EMPTY,
) -> list[Entry]:
    """Entries after a non-apply write by `manager` turned `old` into `new`.

    Every manager loses what the write changed or removed; the writer's Update
    entry gains what it added or modified (its time moves only then).
    """
    diff = compare(content(old), content(new)).excluding(ignored)
    changed = diff.changed
    out: list[Entry] = []
    for entry in entries:
        kept = entry.fields - changed - diff.removed
        out.append(entry if kept == entry.fields else replace(entry, fields=kept))
    own = strip(changed)
    if own:
        mine = Entry(manager, UPDATE, api_version, own, now, subresource)
        for index, entry in enumerate(out):
            if entry.identity == mine.identity:
                out[index] = replace(mine, fields=entry.fields | own)
                break
        else:
            out.append(mine)
    return [e for e in out if e.fields]


def ignored_fields(
    old: Mapping[str, Any], new: Mapping[str, Any], *, subresource: str, has_status: bool = True
) -> FieldSet:
    """Prefixes a write neither compares nor owns: status on the main resource, the rest
    on `/status` (the strategies reset them anyway)."""
    if subresource == "status":
        return frozenset(field_path(k) for k in (old.keys() | new.keys()) if k != "status")
    return frozenset({field_path("status")}) if has_status else EMPTY
