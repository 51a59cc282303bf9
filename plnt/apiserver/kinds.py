"""What a kind adds to the generic HTTP machinery: the handlers of its own subresources.

`resources.dispatch` serves every kind's main resource and the subresources that are a
part of the object (`status`: get, update and patch of that part). A kind whose
subresources do something else (run the object, relay to what it runs, answer another
type) keeps their handlers in its own package and hands them to the composition root as a
`KindHttp`; `build_app` puts every kind's into one `Subresources` table, where the
dispatcher finds a request's handler by (group, resource, subresource). So nothing
generic names a kind, as in sample-apiserver, where each kind installs its own storage.

A subresource whose clients are not kube's may answer its API errors in their shape
instead of a metav1.Status (`Subresource.render_error`); the error middleware asks
`Subresources.find` for the request at hand.

No I/O here. Errors: `ValueError` at composition time for a subresource registered twice
or not declared by the kind's definition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from aiohttp import web

from plnt.api import errors
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.store import ResourceStore

Handler = Callable[[web.Request, ResourceStore, RequestInfo], Awaitable[web.StreamResponse]]
"""Serves one request for a subresource, given the kind's store and the request's info."""

ErrorRenderer = Callable[[errors.APIError], web.StreamResponse]
"""Answers an API error raised while serving a subresource."""


@dataclass(frozen=True, slots=True)
class Subresource:
    """One subresource's handler, and how its errors are answered."""

    handler: Handler
    render_error: ErrorRenderer | None = None
    """None: as every API error, a metav1.Status (`responses.status_response`)."""


@dataclass(frozen=True, slots=True)
class KindHttp:
    """A kind's subresources by name, as its package registers them."""

    definition: ResourceDefinition
    subresources: Mapping[str, Subresource]


class Subresources:
    """Every registered subresource, by (group, resource, subresource)."""

    def __init__(self, kinds: Iterable[KindHttp] = ()) -> None:
        self._found: dict[tuple[str, str, str], Subresource] = {}
        for kind in kinds:
            d = kind.definition
            for name, subresource in kind.subresources.items():
                key = (d.group, d.plural, name)
                if d.subresource(name) is None:
                    raise ValueError(f"{d.plural}.{d.group} declares no subresource {name!r}")
                if key in self._found:
                    raise ValueError(f"{d.plural}/{name}.{d.group} is registered twice")
                self._found[key] = subresource

    def find(self, info: RequestInfo) -> Subresource | None:
        """The registered subresource the request is for, if any."""
        if not info.is_resource_request or not info.subresource:
            return None
        return self._found.get((info.api_group, info.resource, info.subresource))
