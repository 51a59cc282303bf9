"""May this user do this: the authorizers of the API server, and kube's 403 wording.

Authorizers answer ALLOW, DENY or NO_OPINION for the request attributes kube derives
(verb, API group, namespace, resource[/subresource], name; or path and verb for
non-resource requests). `UnionAuthorizer` asks them in order and the first ALLOW or DENY
wins; when every one has no opinion the request is denied. The standalone chain is:
the always-allowed group `system:masters`, the always-allowed health paths, then a small
explicit YAML policy (format in docs/security.md), by default `default_policy`, whose
grants on resources each kind declares beside its definition. Under `plnt serve` a
SubjectAccessReview authorizer takes the policy's place (`delegation`).

Authorizers that can also say *everything* a user may do implement `RuleResolver`
(`rules_for`), which answers SelfSubjectRulesReview (`kubectl auth can-i --list`); a
union that holds an authorizer unable to list its rules says its list is incomplete, as
kube's does.

`forbidden_message` reproduces k8s.io/apiserver's 403 text character for character,
because users and scripts match on it.

Exception tree: `PolicyError` (a policy file that cannot be read or is invalid; raised
at load time, never while authorizing).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import pydantic
import yaml

from plnt.apiserver import authn
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.labelnames import go_quote

ALWAYS_ALLOWED_PATHS: tuple[str, ...] = ("/healthz", "/livez", "/readyz")
ALWAYS_ALLOWED_GROUPS: tuple[str, ...] = (authn.SYSTEM_MASTERS,)
DISCOVERY_PATHS: tuple[str, ...] = (
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/openapi",
    "/openapi/*",
    "/version",
    "/version/",
    "/healthz",
    "/livez",
    "/readyz",
)
MONITORING_GROUP = "system:monitoring"
"""kube's group for scrapers: the default policy lets it get /metrics and the health paths."""


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do, as k8s.io/apiserver's authorizer.Attributes."""

    user: authn.UserInfo
    # get list watch create update patch delete deletecollection (resource requests);
    # the lowercased HTTP method (non-resource requests).
    verb: str
    resource_request: bool
    path: str
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """Verbs allowed on resources (authorization.k8s.io/v1 ResourceRule)."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, list[str]]:
        wire = {"verbs": list(self.verbs)}
        for key, values in (
            ("apiGroups", self.api_groups),
            ("resources", self.resources),
            ("resourceNames", self.resource_names),
        ):
            if values:
                wire[key] = list(values)
        return wire


@dataclass(frozen=True, slots=True)
class NonResourceRule:
    """Verbs allowed on non-resource paths (authorization.k8s.io/v1 NonResourceRule)."""

    verbs: tuple[str, ...]
    non_resource_urls: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, list[str]]:
        wire = {"verbs": list(self.verbs)}
        if self.non_resource_urls:
            wire["nonResourceURLs"] = list(self.non_resource_urls)
        return wire


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything a user may do in one namespace, as far as the authorizers can tell.

    `incomplete`: some authorizer could not list its rules, so more may be allowed.
    """

    resource_rules: tuple[ResourceRule, ...] = ()
    non_resource_rules: tuple[NonResourceRule, ...] = ()
    incomplete: bool = False

    def __add__(self, other: Rules) -> Rules:
        return Rules(
            self.resource_rules + other.resource_rules,
            self.non_resource_rules + other.non_resource_rules,
            self.incomplete or other.incomplete,
        )


@runtime_checkable
class RuleResolver(Protocol):
    """An authorizer that can list what it allows a user in a namespace."""

    def rules_for(self, user: authn.UserInfo, namespace: str) -> Rules: ...


class Authorizer(Protocol):
    """Decides one request; the reason explains a DENY (it may be empty).

    Async because a delegated authorizer asks the cluster (a SubjectAccessReview). An
    authorizer that cannot decide because something failed raises `AuthorizerError`.
    """

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]: ...


@runtime_checkable
class ImmediateAuthorizer(Protocol):
    """An authorizer that never waits: its decision is a function of the attributes."""

    def decide(self, attributes: Attributes) -> tuple[Decision, str]: ...


def decide_now(authorizer: Authorizer, attributes: Attributes) -> tuple[Decision, str] | None:
    """The authorizer's decision when it can be had without awaiting, else None.

    The request path is CPU-bound, and most requests come from `system:masters` (the
    admin certificate, the front proxy's controllers) or probe the health paths: a
    union whose leading authorizers decide in place answers those with no coroutine.
    """
    if isinstance(authorizer, UnionAuthorizer):
        return authorizer.decide_now(attributes)
    # Not isinstance(…, ImmediateAuthorizer): a runtime protocol check walks the
    # protocol's attributes on every call, more than the decision itself costs.
    decide = getattr(authorizer, "decide", None)
    return None if decide is None else cast(ImmediateAuthorizer, authorizer).decide(attributes)


class PolicyError(Exception):
    """A policy file cannot be read or does not validate."""


class AuthorizerError(Exception):
    """An authorizer could not decide (e.g. the SubjectAccessReview API did not answer).

    As in k8s.io/apiserver: the union asks the others; when none allows, the request is
    answered 500 InternalError with this message, never allowed.
    """


# --- 403 wording --------------------------------------------------------------------------

# k8s.io/apiserver escapes these so that an error never looks like HTML; quotes stay.
_SANITIZE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def denial_detail(attributes: Attributes) -> str:
    """The `User "u" cannot …` part of a 403 message (kube's forbiddenMessage)."""
    user, verb = go_quote(attributes.user.name), attributes.verb
    if not attributes.resource_request:
        return f"User {user} cannot {verb} path {go_quote(attributes.path)}"
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    text = (
        f"User {user} cannot {verb} resource {go_quote(resource)} "
        f"in API group {go_quote(attributes.api_group)}"
    )
    if attributes.namespace:
        return f"{text} in the namespace {go_quote(attributes.namespace)}"
    return f"{text} at the cluster scope"


def forbidden_message(attributes: Attributes, *, reason: str = "") -> str:
    """The exact message of kube's 403 Forbidden Status for `attributes`.

    `reason` (an authorizer's explanation) is appended after a colon when not empty,
    as kube does; kube's RBAC leaves it empty for a plain "no rule matched".
    """
    detail = denial_detail(attributes).translate(_SANITIZE)
    if reason:
        detail = f"{detail}: {reason}"
    qualified = forbidden_qualified_resource(attributes)
    if not qualified:
        return f"forbidden: {detail}"
    if not attributes.name:
        return f"{qualified} is forbidden: {detail}"
    return f"{qualified} {go_quote(attributes.name)} is forbidden: {detail}"


def forbidden_qualified_resource(attributes: Attributes) -> str:
    """`resource.group` (or `resource` for the core group) as the Status names it;
    empty for non-resource requests. The subresource is not part of it."""
    if not attributes.resource_request:
        return ""
    if attributes.api_group:
        return f"{attributes.resource}.{attributes.api_group}"
    return attributes.resource


def forbidden_status_details(attributes: Attributes) -> dict[str, str]:
    """`details` of the 403 Status: group, kind (the plural resource) and name, omitting
    empty values as Go's omitempty does."""
    if not attributes.resource_request:
        return {}
    details = {
        "name": attributes.name,
        "group": attributes.api_group,
        "kind": attributes.resource,
    }
    return {key: value for key, value in details.items() if value}


# --- simple authorizers ---------------------------------------------------------------------


def _path_matches(path: str, patterns: Iterable[str]) -> bool:
    """RBAC's nonResourceURLs matching: exact, or a prefix ending in `*`."""
    for pattern in patterns:
        if pattern == "*" or pattern == path:
            return True
        if pattern.endswith("*") and path.startswith(pattern[:-1]):
            return True
    return False


class AlwaysAllowPathsAuthorizer:
    """Allows non-resource requests to the given paths (exact, or `prefix*`) for anyone."""

    def __init__(self, paths: Sequence[str] = ALWAYS_ALLOWED_PATHS) -> None:
        self._paths = tuple(paths)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.decide(attributes)

    def decide(self, attributes: Attributes) -> tuple[Decision, str]:
        if not attributes.resource_request and _path_matches(attributes.path, self._paths):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def rules_for(self, user: authn.UserInfo, namespace: str) -> Rules:
        del user, namespace
        return Rules(non_resource_rules=(NonResourceRule(("*",), self._paths),))


class AlwaysAllowGroupsAuthorizer:
    """Allows everything to members of the given groups (`system:masters` by default)."""

    def __init__(self, groups: Sequence[str] = ALWAYS_ALLOWED_GROUPS) -> None:
        self._groups = frozenset(groups)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.decide(attributes)

    def decide(self, attributes: Attributes) -> tuple[Decision, str]:
        if self._groups.intersection(attributes.user.groups):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def rules_for(self, user: authn.UserInfo, namespace: str) -> Rules:
        del namespace
        if not self._groups.intersection(user.groups):
            return Rules()
        return Rules((ResourceRule(("*",), ("*",), ("*",)),), (NonResourceRule(("*",), ("*",)),))


class UnionAuthorizer:
    """The first ALLOW or DENY wins; all NO_OPINION denies, with the authorizers'
    non-empty reasons joined (usually none, so the 403 text matches kube's)."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self._authorizers = tuple(authorizers)
        # The leading authorizers that decide in place, found once (see `decide_now`).
        leading: list[ImmediateAuthorizer] = []
        for authorizer in self._authorizers:
            if not isinstance(authorizer, ImmediateAuthorizer):
                break
            leading.append(authorizer)
        self._immediate = tuple(leading)
        self._all_immediate = len(leading) == len(self._authorizers)

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        reasons: list[str] = []
        failures: list[str] = []
        for authorizer in self._authorizers:
            try:
                decision, reason = await authorizer.authorize(attributes)
            except AuthorizerError as error:
                failures.append(str(error))
                continue
            if decision is not Decision.NO_OPINION:
                if decision is Decision.DENY and failures:
                    break  # kube: an error with no ALLOW answers 500, not 403
                return decision, reason
            if reason:
                reasons.append(reason)
        if failures:
            raise AuthorizerError("; ".join(failures))
        return Decision.DENY, "; ".join(reasons)

    def decide_now(self, attributes: Attributes) -> tuple[Decision, str] | None:
        """`authorize`'s answer when the authorizers up to the deciding one are all
        immediate; None when one that must be awaited would be asked."""
        reasons: list[str] = []
        for authorizer in self._immediate:
            decision, reason = authorizer.decide(attributes)
            if decision is not Decision.NO_OPINION:
                return decision, reason
            if reason:
                reasons.append(reason)
        if not self._all_immediate:
            return None
        return Decision.DENY, "; ".join(reasons)

    def rules_for(self, user: authn.UserInfo, namespace: str) -> Rules:
        """Every authorizer's rules; incomplete when one of them cannot list its own."""
        rules = Rules()
        for authorizer in self._authorizers:
            if isinstance(authorizer, RuleResolver):
                rules = rules + authorizer.rules_for(user, namespace)
            else:
                rules = rules + Rules(incomplete=True)
        return rules


# --- the policy file --------------------------------------------------------------------------


class PolicyRule(pydantic.BaseModel):
    """One grant: who (users/groups), which verbs, on what (resources or paths)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    verbs: tuple[str, ...]
    resources: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = pydantic.Field(default=("*",), alias="apiGroups")
    namespaces: tuple[str, ...] = ("*",)
    resource_names: tuple[str, ...] = pydantic.Field(default=(), alias="resourceNames")
    non_resource_paths: tuple[str, ...] = pydantic.Field(default=(), alias="nonResourcePaths")

    @pydantic.model_validator(mode="after")
    def _check(self) -> PolicyRule:
        if not self.users and not self.groups:
            raise ValueError("a rule needs users or groups")
        if not self.verbs:
            raise ValueError("a rule needs at least one verb")
        if bool(self.resources) == bool(self.non_resource_paths):
            raise ValueError("a rule needs exactly one of resources or nonResourcePaths")
        if self.non_resource_paths and (
            self.resource_names or self.api_groups != ("*",) or self.namespaces != ("*",)
        ):
            raise ValueError("nonResourcePaths rules take no apiGroups, namespaces, resourceNames")
        return self

    def applies_to(self, user: authn.UserInfo) -> bool:
        return user.name in self.users or any(group in self.groups for group in user.groups)

    def allows(self, attributes: Attributes) -> bool:
        if not self.applies_to(attributes.user) or not _any_or(self.verbs, attributes.verb):
            return False
        if not attributes.resource_request:
            return bool(self.non_resource_paths) and _path_matches(
                attributes.path, self.non_resource_paths
            )
        if not self.resources:
            return False
        return (
            _any_or(self.api_groups, attributes.api_group)
            and _any_or(self.namespaces, attributes.namespace)
            and _resource_matches(self.resources, attributes)
            and (not self.resource_names or attributes.name in self.resource_names)
        )


def _any_or(allowed: Sequence[str], value: str) -> bool:
    return "*" in allowed or value in allowed


def _resource_matches(patterns: Sequence[str], attributes: Attributes) -> bool:
    """RBAC's matching: `*`, `resource`, `resource/sub`, `*/sub`, `resource/*`.
    A bare resource does not grant its subresources."""
    wanted = attributes.resource
    if attributes.subresource:
        wanted = f"{wanted}/{attributes.subresource}"
    for pattern in patterns:
        if pattern in ("*", wanted):
            return True
        if not attributes.subresource:
            continue
        if pattern == f"*/{attributes.subresource}" or pattern == f"{attributes.resource}/*":
            return True
    return False


class Policy(pydantic.BaseModel):
    """A list of grants; anything not granted gets no opinion (and so a 403)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    rules: tuple[PolicyRule, ...] = ()


def load_policy(path: Path) -> Policy:
    """Read and validate a YAML policy file."""
    try:
        document: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PolicyError(f"cannot read policy file {path}: {error}") from error
    except yaml.YAMLError as error:
        raise PolicyError(f"policy file {path} is not valid YAML: {error}") from error
    return parse_policy(document, source=str(path))


def parse_policy(document: Any, *, source: str = "policy") -> Policy:
    """Validate an already-parsed policy document."""
    try:
        return Policy.model_validate(document if document is not None else {})
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc']) or '(root)'}: {problem['msg']}"
            for problem in error.errors()
        )
        raise PolicyError(f"{source} is invalid: {problems}") from error


def kind_rules(definitions: Iterable[ResourceDefinition]) -> list[dict[str, Any]]:
    """Every kind's grants (`ResourceDefinition.grants`) as policy rules: one rule per
    group and verbs, its resources in the kinds' order."""
    merged: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for d in definitions:
        for grant in d.grants:
            resources = merged.setdefault((grant.group, grant.verbs), [])
            resources += [f"{d.plural}/{part}" if part else d.plural for part in grant.parts]
    return [
        {"groups": [group], "verbs": list(verbs), "resources": resources}
        for (group, verbs), resources in merged.items()
    ]


def default_policy(definitions: Iterable[ResourceDefinition]) -> Policy:
    """Standalone defaults: admins everything; what each kind of `definitions` (the
    installed ones, from the composition root) grants the standing groups (viewers read,
    invokers run: `kind_rules`); every authenticated user discovery and health; scrapers
    (`MONITORING_GROUP`) /metrics and health."""
    return parse_policy(
        {
            "rules": [
                {"groups": [authn.SYSTEM_MASTERS], "verbs": ["*"], "resources": ["*"]},
                {"groups": [authn.SYSTEM_MASTERS], "verbs": ["*"], "nonResourcePaths": ["*"]},
                *kind_rules(definitions),
                {
                    "groups": [authn.SYSTEM_AUTHENTICATED],
                    "verbs": ["get"],
                    "nonResourcePaths": list(DISCOVERY_PATHS),
                },
                {  # kube's system:monitoring role: scrapers such as Prometheus
                    "groups": [MONITORING_GROUP],
                    "verbs": ["get"],
                    "nonResourcePaths": ["/metrics", "/healthz", "/livez", "/readyz"],
                },
            ]
        },
        source="default policy",
    )


class PolicyAuthorizer:
    """ALLOW when a rule of the policy grants the request, else NO_OPINION."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    @classmethod
    def from_file(cls, path: Path) -> PolicyAuthorizer:
        return cls(load_policy(path))

    async def authorize(self, attributes: Attributes) -> tuple[Decision, str]:
        return self.decide(attributes)

    def decide(self, attributes: Attributes) -> tuple[Decision, str]:
        for rule in self._policy.rules:
            if rule.allows(attributes):
                return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""

    def rules_for(self, user: authn.UserInfo, namespace: str) -> Rules:
        """The policy's grants to `user` that hold in `namespace` (and every path grant)."""
        resource: list[ResourceRule] = []
        non_resource: list[NonResourceRule] = []
        for rule in self._policy.rules:
            if not rule.applies_to(user):
                continue
            if rule.non_resource_paths:
                non_resource.append(NonResourceRule(rule.verbs, rule.non_resource_paths))
            elif _any_or(rule.namespaces, namespace):
                resource.append(
                    ResourceRule(rule.verbs, rule.api_groups, rule.resources, rule.resource_names)
                )
        return Rules(tuple(resource), tuple(non_resource))


def standalone_authorizer(
    policy: Policy | None = None, *, definitions: Iterable[ResourceDefinition] | None = None
) -> UnionAuthorizer:
    """kube's defaults first (system:masters, health paths), then the policy: by default
    `default_policy` of `definitions`, the installed kinds' (the composition root's).
    Raises ValueError when neither is given: a default policy without the kinds' grants
    would deny viewers and invokers what the kinds give them."""
    if policy is None:
        if definitions is None:
            raise ValueError("definitions: the default policy needs the installed kinds")
        policy = default_policy(definitions)
    return UnionAuthorizer(
        [
            AlwaysAllowGroupsAuthorizer(),
            AlwaysAllowPathsAuthorizer(),
            PolicyAuthorizer(policy),
        ]
    )
