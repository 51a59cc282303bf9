"""What kind a create or update body says it is, read as kube-apiserver's decoder reads it.

kube decodes a custom resource's body by first reading `apiVersion` and `kind` as
Go strings, then into an unstructured object, which must name its kind. So a body
that is not an object, whose `apiVersion` or `kind` is not a string, whose
`apiVersion` has more than one `/`, or that names no kind is a 400 before anything
else is looked at, worded as kube words it (clients and people search for
"Object 'Kind' is missing"). A built-in kind (`ResourceDefinition.builtin`) is
decoded with the URL's kind as the default instead, so a missing kind is no error
there. A kind or apiVersion that is present but different from the URL's is
`admitting.check_identity`'s (also 400).

Pure functions raising `errors.BadRequest`; the body has already been decoded.
"""

from __future__ import annotations

import json
from typing import Any

from plnt.api import errors
from plnt.registry import decoding
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.labelnames import go_json_type

_TYPE_META_STRUCT = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
    'Kind string "json:\\"kind,omitempty\\"" }'
)


def summarize(data: bytes, max_length: int = 30) -> str:
    """kube's summary of a body it cannot recognise: text if it opens with `{`, else hex."""
    if not data:
        return "<empty>"
    cut = data[:max_length]
    more = " ..." if len(data) > max_length else ""
    if data.startswith(b"{"):
        return cut.decode("utf-8", "replace") + more
    return cut.hex() + more


def _unrecognized(definition: ResourceDefinition, problem: str, data: bytes) -> errors.BadRequest:
    return errors.BadRequest(
        f"the object provided is unrecognized (must be of type {definition.kind}): "
        f"{problem} ({summarize(data)})"
    )


def check_type_meta(
    definition: ResourceDefinition,
    body: Any,
    *,
    data: bytes,
    media: str,
    field_validation: str,
) -> None:
    """kube's 400 for a body whose apiVersion/kind cannot be read or whose kind is missing.

    `data` is the body as sent and `media` its type; `field_validation` picks kube's
    wording (its strict decoder, used for Warn and Strict, words a missing kind
    differently from the plain one used for Ignore).
    """
    if body is not None and not isinstance(body, dict):
        problem = (
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{go_json_type(body)} into Go value of type {_TYPE_META_STRUCT}"
        )
        raise _unrecognized(definition, problem, data)
    fields = body or {}
    for name in ("apiVersion", "kind"):
        value = fields.get(name)
        if value is not None and not isinstance(value, str):
            problem = (
                "couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{go_json_type(value)} into Go struct field .{name} of type string"
            )
            raise _unrecognized(definition, problem, data)
    api_version = fields.get("apiVersion") or ""
    if api_version.count("/") > 1:
        raise _unrecognized(definition, f"unexpected GroupVersion string: {api_version}", data)
    if fields.get("kind") or definition.builtin:
        return
    if field_validation == "Ignore":
        sent = data if media in decoding.JSON_CONTENT_TYPES else _json_text(body)
        raise errors.BadRequest(
            f'{definition.kind} in version "{definition.version}" cannot be handled as a '
            f"{definition.kind}: Object 'Kind' is missing in '{sent.decode('utf-8', 'replace')}'"
        )
    missing = f"Object 'Kind' is missing in '{data.decode('utf-8', 'replace')}'"
    raise _unrecognized(definition, missing, data)


def _json_text(body: Any) -> bytes:
    """A YAML body as kube's YAML-to-JSON step writes it (compact, keys sorted)."""
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
