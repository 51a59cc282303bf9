"""Who asks and what for: user.Info and the authorizer attributes kube derives from a request.

Part of the kube-apiserver stand-in (a test double: no kube-apiserver runs here).

`request_attributes` follows k8s.io/apiserver `endpoints/request/requestinfo.go`:
`/api/v1/...` and `/apis/<group>/<version>/...` with at least a resource are resource
requests (namespace from `namespaces/<ns>/`, GET on a collection is `list`, or `watch`
when `?watch=` says so as kube decodes a boolean parameter — any value but `false` or
`0` —, a `metadata.name=` field selector names the object). The deprecated path prefixes
`/watch/` and `/proxy/` give the verb `watch` or `proxy` whatever the method, and a
`proxy` request has no subresource (kube's `specialVerbsNoSubresources`). Everything else
(discovery, `/openapi`, `/version`) is a non-resource request whose verb is the
lowercased HTTP method. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

SYSTEM_AUTHENTICATED = "system:authenticated"
SYSTEM_UNAUTHENTICATED = "system:unauthenticated"
SYSTEM_ANONYMOUS = "system:anonymous"
SYSTEM_MASTERS = "system:masters"

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_SPECIAL_VERBS = ("proxy", "watch")
_SPECIAL_VERBS_WITHOUT_SUBRESOURCES = ("proxy",)


@dataclass(frozen=True, slots=True)
class User:
    """user.Info: name, uid, groups and extra (lists of strings per key)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_authenticated_group(self) -> User:
        """The AuthenticatedGroupAdder: every authenticated user is in system:authenticated."""
        if SYSTEM_AUTHENTICATED in self.groups or SYSTEM_UNAUTHENTICATED in self.groups:
            return self
        return User(self.name, self.uid, (*self.groups, SYSTEM_AUTHENTICATED), self.extra)


ANONYMOUS = User(SYSTEM_ANONYMOUS, groups=(SYSTEM_UNAUTHENTICATED,))


@dataclass(frozen=True, slots=True)
class Attributes:
    """authorizer.Attributes of one request (or of one SubjectAccessReview)."""

    user: User
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def request_attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes kube's RequestInfoFactory would give this request."""
    parts = [p for p in path.strip("/").split("/") if p]
    non_resource = Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
    if not parts or parts[0] not in ("api", "apis"):
        return non_resource
    if parts[0] == "api":
        if len(parts) < 2:
            return non_resource
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 3:
            return non_resource
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return non_resource
    special = ""
    if rest[0] in _SPECIAL_VERBS and len(rest) > 1:
        special, rest = rest[0], rest[1:]  # the deprecated /watch/ and /proxy/ prefixes
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        # As kube: /api/v1/namespaces/<ns> is the namespace object, in its own namespace;
        # its status and finalize subresources stay on it.
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    with_subresource = len(rest) > 2 and special not in _SPECIAL_VERBS_WITHOUT_SUBRESOURCES
    subresource = rest[2] if with_subresource else ""
    if special:
        verb = special
    elif method in ("GET", "HEAD"):
        verb = "get"
        if not name:
            verb = "watch" if watching(query) else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def watching(query: Mapping[str, str]) -> bool:
    """`?watch=` as kube decodes a boolean query parameter: present and neither `false`
    (any case) nor `0` — so `?watch=` and `?watch=yes` watch too."""
    value = query.get("watch")
    return value is not None and value.lower() not in ("false", "0")


def _name_from_field_selector(selector: str) -> str:
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if key.strip() == "metadata.name" and not key.endswith("!"):
            return value.removeprefix("=").strip()
    return ""
