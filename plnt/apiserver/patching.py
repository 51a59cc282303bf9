"""Patch types on the wire: which function applies a Content-Type, and how its errors read.

Shared by the main resource, `/status` and `/scale`, so every PATCH endpoint
accepts the same types and answers the same statuses: a malformed patch body is
400, more than 10 000 JSON-patch operations 413, a patch that cannot apply 422.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plnt.api import errors
from plnt.apiserver import negotiation
from plnt.registry import patches
from plnt.registry.definitions import Object

ACCEPTED = (
    negotiation.JSON_PATCH,
    negotiation.MERGE_PATCH,
    negotiation.STRATEGIC_PATCH,
    negotiation.APPLY_PATCH,
)


def unsupported(accepted: tuple[str, ...] = ACCEPTED) -> errors.UnsupportedMediaType:
    """kube's 415 for a PATCH whose Content-Type is not a patch type."""
    return errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )


def applier(media: str, patch: Any) -> Callable[[Object], Object]:
    """The function applying `patch` of type `media` (one of negotiation.PATCH_TYPES)."""
    if media == negotiation.JSON_PATCH:
        return lambda old: patches.apply_json_patch(old, patch)
    if media == negotiation.MERGE_PATCH:
        return lambda old: patches.apply_merge_patch(old, patch)
    return lambda old: patches.apply_strategic_merge_patch(old, patch)


def api_error(error: patches.PatchError, *, qualified_kind: str, name: str) -> errors.APIError:
    """The API error for a patch that failed to apply."""
    if isinstance(error, patches.MalformedPatch):
        return errors.BadRequest(str(error))
    if isinstance(error, patches.TooManyPatchOperations):
        return errors.RequestEntityTooLarge(str(error))
    kind, _, group = qualified_kind.partition(".")
    return errors.Invalid(
        f'{qualified_kind} "{name}" is invalid: patch: {error}',
        name=name,
        group=group,
        kind=kind,
        causes=[errors.Cause("FieldValueInvalid", str(error), "patch")],
    )
