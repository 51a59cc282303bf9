"""GetOptions and ListOptions (watches included): resourceVersion, selectors, limits, timeouts."""

from __future__ import annotations

from dataclasses import dataclass

from multidict import MultiMapping

from plnt.api import errors
from plnt.apiserver import queryvalues
from plnt.apiserver.params import fielderrors
from plnt.registry import fieldselectors, selectors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.labelnames import go_quote
from plnt.registry.options import ListOptions


def get_options(query: MultiMapping[str]) -> str:
    """GetOptions: the resourceVersion a read may be served at."""
    queryvalues.pretty(query)
    return queryvalues.resource_version(query)


def _selector_error(parameter: str, error: selectors.SelectorError) -> errors.BadRequest:
    text = str(error)
    return errors.BadRequest(text, causes=[errors.Cause("FieldValueInvalid", text, parameter)])


@dataclass(frozen=True, slots=True)
class Watching:
    """The watch-only parts of ListOptions."""

    timeout_seconds: int | None
    allow_bookmarks: bool
    send_initial_events: bool | None


def wants_watch(query: MultiMapping[str]) -> bool:
    """`watch` as kube reads it (strictly here): a bare `?watch` is true."""
    return bool(queryvalues.boolean(query, "watch"))


def list_options(
    query: MultiMapping[str], definition: ResourceDefinition, *, watch: bool
) -> ListOptions:
    """ListOptions converted in kube's order, then ValidateListOptions (all errors, 422)."""
    queryvalues.pretty(query)
    label_text = queryvalues.first(query, "labelSelector") or ""
    try:
        label = selectors.parse_label_selector(label_text)
    except selectors.SelectorError as error:
        raise _selector_error("labelSelector", error) from error
    try:
        field = fieldselectors.parse_field_selector(
            queryvalues.first(query, "fieldSelector") or "",
            allowed=definition.selectable_field_names(),
        )
    except selectors.SelectorError as error:
        raise _selector_error("fieldSelector", error) from error
    watch = wants_watch(query) or watch
    allow_bookmarks = bool(queryvalues.boolean(query, "allowWatchBookmarks"))
    rv = queryvalues.resource_version(query)
    match = queryvalues.first(query, "resourceVersionMatch") or ""
    timeout = queryvalues.integer(query, "timeoutSeconds")
    limit = queryvalues.integer(query, "limit") or 0
    continue_token = queryvalues.first(query, "continue") or ""
    send_initial = queryvalues.boolean(query, "sendInitialEvents")
    causes = (
        _watch_causes(match, continue_token, send_initial, allow_bookmarks)
        if watch
        else _list_causes(match, rv, continue_token, send_initial)
    )
    if causes:
        raise fielderrors.options_invalid("ListOptions", causes)
    return ListOptions(
        label_selector=label,
        field_selector=field,
        limit=max(limit, 0),
        continue_token=continue_token or None,
        resource_version=rv,
        resource_version_match=match,
        timeout_seconds=timeout,
        allow_watch_bookmarks=allow_bookmarks,
        send_initial_events=send_initial,
    )


_MATCHES = ("Exact", "NotOlderThan")


def _list_causes(
    match: str, rv: str, continue_token: str, send_initial: bool | None
) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    if match:
        if not rv:
            causes.append(
                fielderrors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if continue_token:
            causes.append(
                fielderrors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in _MATCHES:
            causes.append(
                fielderrors.not_supported("resourceVersionMatch", go_quote(match), [*_MATCHES, ""])
            )
        if match == "Exact" and rv == "0":
            causes.append(
                fielderrors.forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial is not None:
        causes.append(
            fielderrors.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
        )
    return causes


def _watch_causes(
    match: str, continue_token: str, send_initial: bool | None, allow_bookmarks: bool
) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    if send_initial is not None and match != "NotOlderThan":
        causes.append(
            fielderrors.forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )
        )
    if match:
        if send_initial is None:
            causes.append(
                fielderrors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided",
                )
            )
        if match != "NotOlderThan":
            causes.append(
                fielderrors.not_supported("resourceVersionMatch", go_quote(match), ["NotOlderThan"])
            )
        if continue_token:
            causes.append(
                fielderrors.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
    # plnt sends the initial-events-end bookmark only as a bookmark, so WatchList needs them.
    if send_initial and not allow_bookmarks:
        causes.append(
            fielderrors.forbidden(
                "allowWatchBookmarks",
                "allowWatchBookmarks must be set to true when sendInitialEvents is set",
            )
        )
    return causes
