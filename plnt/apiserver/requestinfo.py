"""Request attributes from the path and method, as k8s.io/apiserver's RequestInfoFactory does.

Authorization, metrics and dispatch all read the same `RequestInfo`, computed
once per request by a middleware, so they can never disagree about what a
request is.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from multidict import MultiMapping

from plnt.registry import fieldselectors, selectors

PATH_SUBRESOURCES = frozenset({"proxy"})
"""Subresources whose URL may continue with a path of its own (kube's `Parts[3:]`).

kube's `RequestInfoFactory` (staging/src/k8s.io/apiserver/pkg/endpoints/request/
requestinfo.go) keeps any such tail, and its route installer
(staging/src/k8s.io/apiserver/pkg/endpoints/installer.go) serves one only for a
subresource whose storage asks for it (a `rest.Connecter` whose `NewConnectOptions`
answers a subpath): in kube those are the `proxy` subresources (pods, services, nodes).
plnt parses before it knows the kind, so it names kube's one path-taking subresource
here, and answers any other tail as no resource (404)."""

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
"""`/api/v1/namespaces/NAME/status` is the Namespace's subresource, not a resource `status`."""

_METHOD_VERBS = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request is about: a resource request (verb on a resource) or a plain path."""

    path: str
    verb: str
    is_resource_request: bool = False
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def resource_with_subresource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _name_from_field_selector(selector: str) -> str:
    """The name a lone `metadata.name=` term pins ("" if none, or if unparsable)."""
    try:
        parsed = fieldselectors.parse_field_selector(selector, allowed=None)
    except selectors.SelectorError:
        return ""
    return parsed.single_name() or ""


def parse(method: str, path: str, query: MultiMapping[str]) -> RequestInfo:
    """Classify a request; unknown shapes become non-resource requests (and usually 404)."""
    non_resource = RequestInfo(path=path, verb=method.lower())
    stripped = path.strip("/")
    parts = stripped.split("/") if stripped else []
    if "%" in stripped:
        parts = [unquote(p) for p in parts]
    if len(parts) < 2 or parts[0] not in ("api", "apis"):
        return non_resource
    prefix = parts[0]
    if prefix == "apis":
        if len(parts) < 3:
            return non_resource
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        group, version, rest = "", parts[1], parts[2:]
    if not rest:
        return non_resource
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]  # the Namespace itself, or its status/finalize subresource
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    # kube leaves what follows a subresource uninterpreted; plnt serves such a tail only
    # under `proxy` (…/NAME/proxy/v1/chat/completions), any other is no resource (404).
    if len(rest) > 3 and subresource not in PATH_SUBRESOURCES:
        return non_resource
    if method in ("GET", "HEAD"):
        if name:
            verb = "get"
        else:
            watch = query.get("watch", "").lower() in ("true", "1")
            verb = "watch" if watch else "list"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
        if verb == "delete" and not name:
            verb = "deletecollection"
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return RequestInfo(
        path=path,
        verb=verb,
        is_resource_request=True,
        api_prefix=prefix,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
