"""Server-side apply and `metadata.managedFields`, simple but honest.

What it does, after k8s.io/apiserver's fieldmanager and structured-merge-diff:

* Every write records ownership: a create, update or patch gives the fields it set or
  changed to its manager (an `Update` entry; the manager is `?fieldManager=` or the
  User-Agent up to its first `/`, as kube derives it) and takes them from the others;
  fields it removed leave every entry.
* An apply (`PATCH` with `application/apply-patch+yaml`) needs `fieldManager`. The applied
  configuration is merged into the live object (or creates it): structs and maps merge,
  lists merge as their schema says (`x-kubernetes-list-type` map by its keys, set by
  value, atomic replaced; read from the real schemas through `structure`). A field the
  applier sets to a different value than another manager owns is a conflict: 409
  `Apply failed with N conflict(s): ...` worded as kube words it, unless `force=true`,
  which takes the fields over. Fields the applier applied before and omits now are
  removed unless another manager still owns them. The applier's `Apply` entry becomes
  exactly the fields it applied.
* Entries are FieldsV1 trees (`f:`, `k:`, `v:` and `.`), one per (manager, operation,
  subresource), with apiVersion and time.

What it does not: no defaulting of the applied configuration before key matching
(except `protocol: TCP` in port keys), no version conversion of ownership, no
`kubectl.kubernetes.io/last-applied-configuration` upgrade path, no `i:` (index)
elements (the kinds served have no granular list without keys), and a manager that
owns a struct (`.`) never conflicts on it as a whole.
No I/O here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from tests.support.kube import statuses, structure

Obj = dict[str, Any]
Path = tuple[str, ...]
APPLY_MEDIA = "application/apply-patch+yaml"
_KEY_DEFAULTS = {"protocol": "TCP"}
_IGNORED = {
    ("f:metadata", "f:managedFields"),
    ("f:metadata", "f:resourceVersion"),
    ("f:metadata", "f:uid"),
    ("f:metadata", "f:creationTimestamp"),
    ("f:metadata", "f:generation"),
    ("f:metadata", "f:name"),
    ("f:metadata", "f:namespace"),
    ("f:apiVersion",),
    ("f:kind",),
}


# --- field sets -------------------------------------------------------------------------


def _item_key(item: Any, keys: Iterable[str]) -> str:
    values = {}
    for key in keys:
        if isinstance(item, dict) and (key in item or key in _KEY_DEFAULTS):
            values[key] = item.get(key, _KEY_DEFAULTS.get(key))
    return "k:" + json.dumps(values, sort_keys=True, separators=(",", ":"))


def _list_key(node: structure.Node) -> tuple[str, ...]:
    return node.map_keys or ((node.merge_key,) if node.merge_key else ())


def fields(obj: Any, node: structure.Node, prefix: Path = ()) -> set[Path]:
    """The owned paths of `obj`: leaves, plus `.` for each keyed list item."""
    out: set[Path] = set()
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        path = (*prefix, f"f:{key}")
        if path in _IGNORED:
            continue
        child = node.child(key)
        if isinstance(value, dict) and value and not child.is_atomic_struct:
            out |= fields(value, child, path)
        elif isinstance(value, list) and child.list_type == "map" and _list_key(child):
            for item in value:
                item_path = (*path, _item_key(item, _list_key(child)))
                out.add((*item_path, "."))
                out |= fields(item, child.item(), item_path)
        elif isinstance(value, list) and child.list_type == "set":
            out |= {(*path, "v:" + json.dumps(item)) for item in value}
        else:
            out.add(path)
    return out


def to_fields_v1(paths: Iterable[Path]) -> Obj:
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: Obj, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, below in tree.items():
        path = (*prefix, element)
        if below:
            out |= from_fields_v1(below, path)
        else:
            out.add(path)
    return out


def _lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    current = obj
    for element in path:
        if element == ".":
            return True, None
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(current, dict) and rest in current:
            current = current[rest]
        elif kind == "k" and isinstance(current, list):
            wanted = json.loads(rest)
            found = [i for i in current if _matches(i, wanted)]
            if not found:
                return False, None
            current = found[0]
        elif kind == "v" and isinstance(current, list):
            value = json.loads(rest)
            return value in current, value
        else:
            return False, None
    return True, current


def _matches(item: Any, wanted: Obj) -> bool:
    return isinstance(item, dict) and all(
        item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in wanted.items()
    )


def _remove(obj: Any, path: Path) -> None:
    """Delete the field (or keyed item, or set value) at `path` from `obj` in place."""
    parent: Any = obj
    for element in path[:-1]:
        kind, _, rest = element.partition(":")
        if element == ".":
            break
        if kind == "f" and isinstance(parent, dict):
            parent = parent.get(rest)
        elif kind == "k" and isinstance(parent, list):
            wanted = json.loads(rest)
            parent = next((i for i in parent if _matches(i, wanted)), None)
        if parent is None:
            return
    last = path[-1]
    kind, _, rest = last.partition(":")
    if last == "." and len(path) >= 2:
        _remove(obj, path[:-1])
    elif kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        wanted = json.loads(rest)
        parent[:] = [i for i in parent if not _matches(i, wanted)]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [i for i in parent if i != value]


# --- entries ------------------------------------------------------------------------------


def _entries(obj: Obj) -> list[Obj]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _owned(entry: Obj) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _entry(
    manager: str, operation: str, api_version: str, paths: set[Path], subresource: str, now: str
) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _same(entry: Obj, manager: str, operation: str, subresource: str) -> bool:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource", "")) == (
        manager,
        operation,
        subresource,
    )


def _set_entries(obj: Obj, entries: list[Obj]) -> None:
    kept = [e for e in entries if e.get("fieldsV1")]
    obj.setdefault("metadata", {})["managedFields"] = kept
    if not kept:
        obj["metadata"].pop("managedFields")


def record_update(
    new: Obj, old: Obj | None, *, manager: str, subresource: str = "", now: str
) -> None:
    """Give the fields a create/update changed to `manager`'s Update entry, in place."""
    node = structure.root(new["kind"], new["apiVersion"])
    entries = _entries(old) if old is not None else []
    new_paths = fields(new, node)
    old_paths = fields(old, node) if old is not None else set()
    changed = {p for p in new_paths if p not in old_paths or _lookup(new, p) != _lookup(old, p)}
    removed = old_paths - new_paths
    kept: list[Obj] = []
    mine: set[Path] = set()
    for entry in entries:
        owned = _owned(entry) - removed
        if _same(entry, manager, "Update", subresource):
            mine = owned
            continue
        entry = {**entry, "fieldsV1": to_fields_v1(owned - changed)}
        kept.append(entry)
    mine |= changed
    if mine:
        kept.append(_entry(manager, "Update", new["apiVersion"], mine, subresource, now))
    _set_entries(new, kept)


def _manager_name(entry: Obj) -> str:
    text = statuses.go_quote(str(entry.get("manager", "")))
    if entry.get("subresource"):
        text += f" with subresource {statuses.go_quote(entry['subresource'])}"
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion', '')}"
    return text


def _path_text(path: Path) -> str:
    out = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out += f".{rest}"
        elif kind == "k":
            keys = json.loads(rest)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif kind == "v":
            out += f"[={rest}]"
    return out


def conflict_error(conflicts: list[tuple[Obj, Path]]) -> statuses.StatusError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_manager_name(entry)}",
            "field": _path_text(path),
        }
        for entry, path in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {_manager_name(entry)}: "
            f"{_path_text(path)}"
        )
    else:
        by_manager: dict[str, list[Path]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_manager_name(entry), []).append(path)
        lines = []
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines.extend(f"- {_path_text(p)}" for p in by_manager[name])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return statuses.StatusError(409, "Conflict", message, {"causes": causes})


# --- apply -----------------------------------------------------------------------------------


def merge(live: Any, applied: Any, node: structure.Node) -> Any:
    """The applied configuration merged into the live value, as its schema says."""
    if isinstance(applied, dict) and isinstance(live, dict) and not node.is_atomic_struct:
        out = dict(live)
        for key, value in applied.items():
            out[key] = merge(live.get(key), value, node.child(key)) if key in live else value
        return out
    if isinstance(applied, list) and isinstance(live, list):
        if node.list_type == "map" and _list_key(node):
            keys = _list_key(node)
            out_list = list(live)
            for item in applied:
                wanted = json.loads(_item_key(item, keys)[2:])
                index = next((i for i, x in enumerate(out_list) if _matches(x, wanted)), None)
                if index is None:
                    out_list.append(item)
                else:
                    out_list[index] = merge(out_list[index], item, node.item())
            return out_list
        if node.list_type == "set":
            return list(live) + [v for v in applied if v not in live]
    return copy.deepcopy(applied)


def apply(
    live: Obj | None,
    applied: Obj,
    *,
    manager: str,
    force: bool,
    subresource: str = "",
    now: str,
) -> Obj:
    """The object after `manager` applies `applied` onto `live` (None: it will be created)."""
    node = structure.root(applied["kind"], applied["apiVersion"])
    applied_paths = fields(applied, node)
    base: Obj = live if live is not None else {}
    entries = _entries(base)
    conflicts: list[tuple[Obj, Path]] = []
    for entry in entries:
        if _same(entry, manager, "Apply", subresource):
            continue
        for path in sorted(_owned(entry) & applied_paths):
            if path[-1] == ".":
                continue
            if _lookup(base, path) != _lookup(applied, path):
                conflicts.append((entry, path))
    if conflicts and not force:
        raise conflict_error(conflicts)
    taken = {path for _, path in conflicts}
    previous: set[Path] = set()
    others: list[Obj] = []
    for entry in entries:
        if _same(entry, manager, "Apply", subresource):
            previous = _owned(entry)
        else:
            others.append({**entry, "fieldsV1": to_fields_v1(_owned(entry) - taken)})
    merged = merge(copy.deepcopy(base), applied, node) if live is not None else dict(applied)
    still_owned = set().union(*(_owned(e) for e in others)) if others else set()
    # Whole list items first (their keys are still there to find them), then leaves.
    for path in sorted(previous - applied_paths, key=lambda p: (p[-1] != ".", len(p))):
        below = any(p[: len(path) - 1] == path[:-1] for p in still_owned if path[-1] == ".")
        if path not in still_owned and not below:
            _remove(merged, path)
            _prune(merged, path, applied_paths | still_owned)
    merged.setdefault("metadata", {})
    others.append(_entry(manager, "Apply", applied["apiVersion"], applied_paths, subresource, now))
    _set_entries(merged, others)
    return merged


def _prune(obj: Obj, removed: Path, owned: set[Path]) -> None:
    """Drop the parents a removal left empty when nobody owns anything below them."""
    for depth in range(len(removed) - 1, 0, -1):
        prefix = removed[:depth]
        if not prefix[-1].startswith("f:") or any(p[:depth] == prefix for p in owned):
            continue
        found, value = _lookup(obj, prefix)
        if found and value in ({}, []):
            _remove(obj, prefix)


def manager_from(query_manager: str, user_agent: str) -> str:
    """`?fieldManager=`, else the User-Agent up to its first `/` (kube's default)."""
    if query_manager:
        return query_manager
    return (user_agent.split("/", 1)[0] or "unknown")[:128]
