"""Strategic merge patch (`application/strategic-merge-patch+json`) as kube applies it.

kubectl's client-side apply, `kubectl patch` and Helm 3 send these for built-in kinds.
It is a JSON merge patch except where the schema marks a list with
`x-kubernetes-patch-strategy: merge` (containers by `name`, ports by `containerPort`,
env by `name` ...): there patch items merge into the item with the same merge key and
others are appended. Directives handled: `$patch: replace|delete|merge` on maps and
list items, `$retainKeys`, `$setElementOrder/<list>` and
`$deleteFromPrimitiveList/<list>`. The merge keys and strategies come from the real
schemas (`structure`). No I/O here.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.kube import structure

Obj = dict[str, Any]
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"


def apply(original: Obj, patch: Obj) -> Obj:
    node = structure.root(str(original.get("kind", "")), str(original.get("apiVersion", "")))
    return _merge_map(copy.deepcopy(original), patch, node)


def _merge_map(original: Any, patch: Obj, node: structure.Node) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if not k.startswith("$")}
    if directive == "replace" or not isinstance(original, dict):
        return _strip(body)
    out = dict(original)
    for key, value in body.items():
        child = node.child(key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            merged = _merge_map(out[key], value, child)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, child)
        else:
            merged = _strip(value)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVES) and isinstance(
            out.get(key[len(_DELETE_PRIMITIVES) :]), list
        ):
            name = key[len(_DELETE_PRIMITIVES) :]
            out[name] = [v for v in out[name] if v not in value]
        elif key.startswith(_ORDER) and isinstance(out.get(key[len(_ORDER) :]), list):
            name = key[len(_ORDER) :]
            out[name] = _ordered(out[name], value, node.child(name).merge_key)
    if "$retainKeys" in patch:
        out = {k: v for k, v in out.items() if k in patch["$retainKeys"]}
    return out


def _merge_list(original: list[Any], patch: list[Any], node: structure.Node) -> list[Any]:
    if "merge" not in node.patch_strategies:
        return _strip(patch)
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = node.merge_key
    if not key:  # a merged list of scalars: a union
        return list(original) + [v for v in patch if v not in original]
    out = list(original)
    for item in patch:
        if not isinstance(item, dict):
            continue
        index = next(
            (i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item.get(key)),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append(_strip(item))
        else:
            out[index] = _merge_map(out[index], item, node.item())
    return out


def _ordered(items: list[Any], order: list[Any], key: str) -> list[Any]:
    def rank(item: Any) -> int:
        wanted = item.get(key) if key and isinstance(item, dict) else item
        for index, entry in enumerate(order):
            value = entry.get(key) if key and isinstance(entry, dict) else entry
            if value == wanted:
                return index
        return len(order)

    return sorted(items, key=rank)


def _strip(value: Any) -> Any:
    """A patch value with its directives removed (it is set as a whole)."""
    if isinstance(value, dict):
        if value.get("$patch") == "delete":
            return None
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
