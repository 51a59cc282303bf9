"""Patch application on plain JSON documents: merge patch, JSON patch, strategic merge.

The API server decodes a PATCH body, applies it here to the stored object's JSON,
and only then decodes the result into the resource's model; keeping this step
pure (dicts in, new dicts out, inputs never touched) lets a failed patch leave
nothing changed and lets property tests check the semantics directly.

* JSON merge patch (RFC 7386) uses the `json-merge-patch` library, whose
  algorithm is the RFC's pseudo-code; it works in place, so both inputs are
  deep-copied first.
* JSON patch (RFC 6902) uses `jsonpatch`, one operation at a time so that a
  failure names the operation's index, like kube's cap of 10 000 operations.
* Strategic merge patch: plnt accepts it for its own types with merge-patch
  semantics (so a bare `kubectl patch wfr x -p '{...}'` works) but refuses any
  patch that carries a strategic-merge directive, before applying anything.

Exception tree (every message is user-facing):

    PatchError(ValueError)
    ├── MalformedPatch              the body is not the JSON type the patch type needs (400)
    ├── TooManyPatchOperations      a JSON patch with more than 10 000 operations (413)
    ├── PatchOperationFailed        a JSON patch operation is invalid or does not apply (422)
    ├── PatchResultInvalid          the patched document is not a JSON object (422)
    └── UnsupportedPatchDirective   a strategic-merge directive plnt does not implement (422)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import json_merge_patch
import jsonpatch
import jsonpointer

__all__ = [
    "MAX_JSON_PATCH_OPERATIONS",
    "MalformedPatch",
    "PatchError",
    "PatchOperationFailed",
    "PatchResultInvalid",
    "TooManyPatchOperations",
    "UnsupportedPatchDirective",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "find_strategic_directives",
    "json_patch_unknown_fields",
]

MAX_JSON_PATCH_OPERATIONS = 10_000
_JSON_PATCH_MEMBERS = ("op", "path", "from", "value")


class PatchError(ValueError):
    """A patch that cannot be applied; nothing was changed."""


class MalformedPatch(PatchError):
    """The patch body is not the JSON type its content type requires."""


class TooManyPatchOperations(PatchError):
    """A JSON patch longer than kube allows; kube answers 413 with this message."""


class PatchOperationFailed(PatchError):
    """One JSON patch operation is invalid or does not apply to the document."""

    def __init__(self, message: str, *, index: int, op: str, path: str) -> None:
        super().__init__(message)
        self.index = index
        self.op = op
        self.path = path


class PatchResultInvalid(PatchError):
    """The patch applied, but its result is not a JSON object."""


class UnsupportedPatchDirective(PatchError):
    """A strategic-merge directive (`$patch`, `$setElementOrder/...`, ...) was sent."""

    def __init__(self, message: str, *, directive: str, path: str) -> None:
        super().__init__(message)
        self.directive = directive
        self.path = path


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _require_object(document: Any, what: str) -> None:
    if not isinstance(document, dict):
        raise PatchResultInvalid(f"{what} must be a JSON object, got {_type_name(document)}")


def apply_merge_patch(document: dict[str, Any], patch: Any) -> dict[str, Any]:
    """RFC 7386: objects merge recursively, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        raise MalformedPatch(f"a JSON merge patch must be a JSON object, got {_type_name(patch)}")
    try:
        merged = json_merge_patch.merge(copy.deepcopy(document), copy.deepcopy(patch))
    except RecursionError:
        raise MalformedPatch("the merge patch is nested too deeply") from None
    _require_object(merged, "the patched document")
    result: dict[str, Any] = merged
    return result


def _string_member(operation: dict[str, Any], member: str) -> str:
    value = operation.get(member)
    return value if isinstance(value, str) else ""


def _operation_failed(index: int, operation: Any, reason: str) -> PatchOperationFailed:
    op = path = ""
    if isinstance(operation, dict):
        op, path = _string_member(operation, "op"), _string_member(operation, "path")
    where = f" ({op} {path!r})" if op else ""
    return PatchOperationFailed(
        f"json patch operation {index}{where} failed: {reason}", index=index, op=op, path=path
    )


def apply_json_patch(document: dict[str, Any], patch: Any) -> dict[str, Any]:
    """RFC 6902 with at most `MAX_JSON_PATCH_OPERATIONS` operations, all or nothing."""
    if not isinstance(patch, list):
        raise MalformedPatch(
            f"a JSON patch must be a JSON array of operations, got {_type_name(patch)}"
        )
    if len(patch) > MAX_JSON_PATCH_OPERATIONS:
        raise TooManyPatchOperations(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
            f"got {len(patch)}"
        )
    # Copies of both: `add` inserts the patch's own value objects, and later operations
    # may then modify them, which must never reach the caller's patch.
    result: Any = copy.deepcopy(document)
    for index, operation in enumerate(copy.deepcopy(patch)):
        if not isinstance(operation, dict):
            raise _operation_failed(
                index, operation, f"an operation must be a JSON object, got {_type_name(operation)}"
            )
        for member in ("path", "from"):
            if member in operation and not isinstance(operation[member], str):
                raise _operation_failed(index, operation, f"'{member}' must be a string")
        try:
            result = jsonpatch.JsonPatch([operation]).apply(result, in_place=True)
        except jsonpatch.JsonPatchTestFailed:
            shown = json.dumps(operation.get("value"), sort_keys=True)
            reason = f"test failed: the value at {operation.get('path')!r} is not {shown}"
            raise _operation_failed(index, operation, reason) from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            raise _operation_failed(index, operation, str(error) or type(error).__name__) from None
        except (TypeError, KeyError, IndexError, ValueError, RecursionError) as error:
            # Shapes the library does not anticipate (e.g. a pointer through a string).
            raise _operation_failed(index, operation, f"invalid operation: {error}") from None
    _require_object(result, "the patched document")
    patched: dict[str, Any] = result
    return patched


def json_patch_unknown_fields(patch: Any) -> list[str]:
    """Members of JSON patch operations kube's strict decoding reports, as kube words them.

    kube decodes operations into {op, path, from, value}; under fieldValidation=Strict or
    Warn an extra member `x` of operation 0 is 'json patch unknown field "[0].x"'.
    """
    if not isinstance(patch, list):
        return []
    return [
        f'json patch unknown field "[{index}].{member}"'
        for index, operation in enumerate(patch)
        if isinstance(operation, dict)
        for member in operation
        if member not in _JSON_PATCH_MEMBERS
    ]


_DIRECTIVE_KEYS = ("$patch", "$retainKeys")
_DIRECTIVE_PREFIXES = ("$setElementOrder/", "$deleteFromPrimitiveList/")


def _is_directive(key: str) -> bool:
    return key in _DIRECTIVE_KEYS or key.startswith(_DIRECTIVE_PREFIXES)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def find_strategic_directives(patch: Any) -> Iterator[tuple[str, str]]:
    """Every (directive, path) in a strategic merge patch, in document order.

    The path is where the directive sits: "" for the top level, "spec.canary" or
    "status.conditions[0]" below it. The walk is iterative so no depth can crash it.
    """
    stack: list[tuple[Any, str]] = [(patch, "")]
    while stack:
        value, path = stack.pop()
        children: list[tuple[Any, str]] = []
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _is_directive(key):
                    yield key, path
                children.append((item, _child(path, str(key))))
        elif isinstance(value, list):
            children = [(item, f"{path}[{index}]") for index, item in enumerate(value)]
        stack.extend(reversed(children))


def apply_strategic_merge_patch(document: dict[str, Any], patch: Any) -> dict[str, Any]:
    """plnt's strategic merge: merge-patch semantics, every SMP directive refused up front."""
    if not isinstance(patch, dict):
        raise MalformedPatch(
            f"a strategic merge patch must be a JSON object, got {_type_name(patch)}"
        )
    for directive, path in find_strategic_directives(patch):
        where = f"at {path!r}" if path else "at the top level"
        raise UnsupportedPatchDirective(
            f"strategic merge patch directive {directive!r} {where} is not supported: "
            "plnt applies strategic merge patches with JSON merge patch semantics "
            "(lists are replaced, null deletes); send the full list instead, "
            "or use --type merge or --type json",
            directive=directive,
            path=path,
        )
    return apply_merge_patch(document, patch)
