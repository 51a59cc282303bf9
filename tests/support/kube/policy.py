"""The stand-in's authorizer: a per-test list of RBAC-like rules, decided as RBAC decides.

A `Rule` binds one subject (a user or a group) to verbs on resources (RBAC's
`resources` syntax: `res`, `res/sub`, `*/sub`, `res/*`, `*`) in API groups, optionally
limited to a namespace (a RoleBinding) and to object names, or to non-resource paths
(exact or `prefix*`). Like kube-apiserver's chain, members of `system:masters` are
allowed everything first; then the rules; nothing matching is "no opinion", which the
API answers with 403 and a SubjectAccessReview with `allowed: false` and an empty reason
(RBAC never denies). A rule with `deny=True` is an explicit denial, as a webhook
authorizer may give (`status.denied: true`); RBAC itself has none.

`BOOTSTRAP_RULES` are the cluster roles every cluster binds by default
(system:discovery, system:public-info-viewer, system:basic-user), so discovery and
`kubectl auth can-i` work for any authenticated user. No I/O here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from tests.support.kube import attributes as attributes_module
from tests.support.kube.statuses import go_quote

Decision = Literal["allow", "deny", "no-opinion"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One binding of a subject to a permission (RBAC's role rule + binding in one)."""

    verbs: tuple[str, ...]
    user: str = ""
    group: str = ""
    api_groups: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    namespace: str = ""  # empty: cluster-wide (a ClusterRoleBinding)
    non_resource_paths: tuple[str, ...] = ()
    name: str = "stand-in-rule"
    deny: bool = False

    def __post_init__(self) -> None:
        if bool(self.user) == bool(self.group):
            raise ValueError("a rule names exactly one of user and group")
        if bool(self.resources) == bool(self.non_resource_paths):
            raise ValueError("a rule has exactly one of resources and non_resource_paths")

    def subject_matches(self, user: attributes_module.User) -> bool:
        if self.user:
            return self.user == user.name
        return self.group in user.groups

    def permits(self, attrs: attributes_module.Attributes) -> bool:
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.resource_request:
            return bool(self.non_resource_paths) and _path_matches(
                attrs.path, self.non_resource_paths
            )
        if not self.resources:
            return False
        if self.namespace and self.namespace != attrs.namespace:
            return False
        if "*" not in self.api_groups and attrs.api_group not in self.api_groups:
            return False
        if not _resource_matches(attrs.resource, attrs.subresource, self.resources):
            return False
        return not self.names or attrs.name in self.names

    def reason(self, user: attributes_module.User) -> str:
        """RBAC's allow reason: which binding of which role to which subject."""
        subject = f"User {go_quote(self.user)}" if self.user else f"Group {go_quote(self.group)}"
        if self.namespace:
            binding = (
                f"RoleBinding {go_quote(f'{self.name}/{self.namespace}')} "
                f"of Role {go_quote(self.name)}"
            )
        else:
            binding = (
                f"ClusterRoleBinding {go_quote(self.name)} of ClusterRole {go_quote(self.name)}"
            )
        return f"RBAC: allowed by {binding} to {subject}"


def _resource_matches(resource: str, subresource: str, patterns: Iterable[str]) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for pattern in patterns:
        if pattern in ("*", combined):
            return True
        if subresource and pattern in (f"*/{subresource}", f"{resource}/*"):
            return True
    return False


def _path_matches(path: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern in ("*", path):
            return True
        if pattern.endswith("*") and path.startswith(pattern[:-1]):
            return True
    return False


_DISCOVERY_PATHS = (
    "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*",
    "/version", "/version/", "/healthz", "/livez", "/readyz",
)  # fmt: skip

BOOTSTRAP_RULES: tuple[Rule, ...] = (
    Rule(
        verbs=("get",),
        group=attributes_module.SYSTEM_AUTHENTICATED,
        non_resource_paths=_DISCOVERY_PATHS,
        name="system:discovery",
    ),
    Rule(
        verbs=("get",),
        group=attributes_module.SYSTEM_UNAUTHENTICATED,
        non_resource_paths=("/healthz", "/livez", "/readyz", "/version", "/version/"),
        name="system:public-info-viewer",
    ),
    Rule(
        verbs=("create",),
        group=attributes_module.SYSTEM_AUTHENTICATED,
        api_groups=("authorization.k8s.io",),
        resources=("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
        name="system:basic-user",
    ),
    Rule(
        verbs=("create",),
        group=attributes_module.SYSTEM_AUTHENTICATED,
        api_groups=("authentication.k8s.io",),
        resources=("selfsubjectreviews",),
        name="system:basic-user",
    ),
)


class Policy:
    """The rules a test grants, plus the bootstrap roles; safe to change from any thread."""

    def __init__(self, rules: Sequence[Rule] = (), *, bootstrap: bool = True) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = [*(BOOTSTRAP_RULES if bootstrap else ()), *rules]

    def allow(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._rules.remove(rule)

    @property
    def rules(self) -> tuple[Rule, ...]:
        with self._lock:
            return tuple(self._rules)

    def decide(self, attrs: attributes_module.Attributes) -> tuple[Decision, str]:
        """allow/deny/no-opinion with the reason kube would give."""
        if attributes_module.SYSTEM_MASTERS in attrs.user.groups:
            return "allow", ""  # the privileged-group authorizer, before RBAC
        rules = self.rules
        for rule in rules:
            if rule.deny and rule.subject_matches(attrs.user) and rule.permits(attrs):
                return "deny", f"denied by {rule.name}"
        for rule in rules:
            if not rule.deny and rule.subject_matches(attrs.user) and rule.permits(attrs):
                return "allow", rule.reason(attrs.user)
        return "no-opinion", ""
