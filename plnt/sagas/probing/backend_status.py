"""Writing a PlntBackend's status, and the Events of its transitions, in one decision.

Every writer of a backend's status (the resolve activity's probe, each worker's
`backend_probes.Prober`) goes through `record`: it computes the new status from the
status it read, writes it as a merge patch carrying that read's resourceVersion, and
then records the Events `backend_transitions.transitions` finds between the status it
read and the status written. The resourceVersion is what makes the Events right when
several workers probe the same backend: a writer whose read is stale gets a 409, reads
again and decides again against the newer status (which usually already holds the
same measurement, so it finds no transition), so each transition is recorded by the one
writer that made it. A backend that was deleted, recreated or given a new spec meanwhile
is not written (the measurement was of what it was); after `ATTEMPTS` conflicts in a row
the write is given up too. The next probe round writes again.

Events are written with the worker's `plnt.client.events.EventPoster` (repeats within
its window counted into one Event); a failed Event write is logged, never raised, as
the saga's Events are: they are diagnostics, and the status written stands.

Activity-side code: I/O through `plnt.client`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from plnt.api import names
from plnt.api.events import event_about
from plnt.client import errors as client_errors
from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.client.events import EventPoster
from plnt.sagas.probing import backend_transitions

log = logging.getLogger("plnt.sagas")

COMPONENT = "plnt-prober"
"""The Events' source component (reportingComponent): the worker's backend prober."""
ATTEMPTS = 3

PatchFor = Callable[[Mapping[str, Any]], dict[str, Any] | None]
"""The status patch to write given the backend's current status; None writes nothing."""


async def record(
    api: PlntClient,
    backend: Mapping[str, Any],
    patch_for: PatchFor,
    *,
    events: EventPoster | None,
) -> dict[str, Any] | None:
    """Write `patch_for(status)` to `backend`'s status (see the module docstring) and
    record its transitions' Events; the backend as written, or None when nothing was."""
    current: Mapping[str, Any] = backend
    for _ in range(ATTEMPTS):
        old = current.get("status") or {}
        patch = patch_for(old)
        if patch is None:
            return None
        meta = current.get("metadata") or {}
        body: dict[str, Any] = {"status": patch}
        if meta.get("resourceVersion"):
            body["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        try:
            answer = await api.request(
                "PATCH", _path(api, meta, "status"), json=body, content_type=transport.MERGE_PATCH
            )
        except client_errors.Conflict:
            fresh = await _read(api, meta)
            if fresh is None or not _same_spec(backend, fresh):
                return None  # gone, recreated or re-specified: what was measured is moot
            current = fresh
            continue
        except client_errors.ClientError as error:
            log.warning("could not record the probe of %s: %s", meta.get("name"), error)
            return None
        written = answer.json()
        if not isinstance(written, dict) or not isinstance(written.get("metadata"), dict):
            written = {**current, "status": _merged(old, patch)}
        found = backend_transitions.transitions(old, written.get("status") or {})
        await _announce(events, written, found)
        return written
    log.warning("gave up recording the probe of %s: it kept changing", _name(backend))
    return None


async def _read(api: PlntClient, meta: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        found = (await api.request("GET", _path(api, meta))).json()
    except client_errors.NotFound:
        return None
    except client_errors.ClientError as error:
        log.warning("could not read PlntBackend %s again: %s", meta.get("name"), error)
        return None
    return found if isinstance(found, dict) else None


async def _announce(
    events: EventPoster | None,
    backend: Mapping[str, Any],
    found: list[backend_transitions.Transition],
) -> None:
    if events is None:
        return
    for transition in found:
        event = event_about(
            backend,
            type=transition.type,
            reason=transition.reason,
            message=transition.message,
            component=COMPONENT,
        )
        try:
            await events.write(event)
        except client_errors.ClientError as error:
            log.info("event %s not recorded: %s", transition.reason, error)


def _same_spec(measured: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    """Whether `fresh` is the object and generation that was measured."""
    before, after = measured.get("metadata") or {}, fresh.get("metadata") or {}
    return all(before.get(key) == after.get(key) for key in ("uid", "generation"))


def _merged(old: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`old` with the merge patch of its top-level fields applied (null removes)."""
    merged = {**old, **patch}
    return {key: value for key, value in merged.items() if value is not None}


def _path(api: PlntClient, meta: Mapping[str, Any], subresource: str = "") -> str:
    return api.object_path(
        names.BACKENDS,
        str(meta["name"]),
        namespace=str(meta["namespace"]),
        subresource=subresource,
    )


def _name(backend: Mapping[str, Any]) -> str:
    meta = backend.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
